package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/relaydev/relay/relay/mockupstream"
)

// newHTTPClient returns a client for up to conns concurrent streams to one
// host. keepAlive false makes every request dial, for figures that must
// include the reconnect. The client has no overall timeout: streams are
// bounded by their contexts.
func newHTTPClient(conns int, keepAlive bool) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext:           (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		MaxIdleConns:          0, // no limit across hosts
		MaxIdleConnsPerHost:   conns,
		IdleConnTimeout:       90 * time.Second,
		ResponseHeaderTimeout: time.Minute,
		DisableCompression:    true,
		DisableKeepAlives:     !keepAlive,
		ReadBufferSize:        4 << 10,
		WriteBufferSize:       2 << 10,
	}}
}

// conversation is one prompt and the exact answer the fake upstream gives
// it with tokens tokens.
type conversation struct {
	model  string
	msgs   []mockupstream.Message
	tokens int
	body   []byte
	answer string
}

func newConversation(model, prompt string, tokens int) conversation {
	msgs := []mockupstream.Message{{Role: "user", Content: prompt}}
	body, err := json.Marshal(map[string]any{"model": model, "stream": true, "messages": msgs})
	if err != nil {
		panic(err) // strings only
	}
	return conversation{model: model, msgs: msgs, tokens: tokens, body: body, answer: mockupstream.AnswerText(msgs, tokens)}
}

// tokenEnds returns the byte offset in the answer at which each of its
// tokens ends, to count tokens in chunks that carry several.
func (c conversation) tokenEnds() []int {
	var ends []int
	n := 0
	for _, tok := range mockupstream.Answer(c.msgs, c.tokens) {
		n += len(tok)
		ends = append(ends, n)
	}
	return ends
}

// chatURL is the chat completions URL of an edge ("http://host:port") or
// of the fake upstream, whose URL already ends in /v1.
func chatURL(base string) string {
	if strings.HasSuffix(base, "/v1") {
		return base + "/chat/completions"
	}
	return base + "/v1/chat/completions"
}

// opened is a stream whose response headers arrived.
type opened struct {
	resp     *http.Response
	sse      *sseReader
	streamID string // X-Relay-Stream-Id; empty from the fake upstream
}

func (o *opened) Close() { o.resp.Body.Close() }

// open sends a request and returns its event stream, or an error carrying
// the status and body of a response that is not one.
func open(ctx context.Context, hc *http.Client, method, url string, body []byte, lastEventID string) (*opened, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		resp.Body.Close()
		return nil, fmt.Errorf("HTTP %d: %s", resp.StatusCode, bytes.TrimSpace(b))
	}
	return &opened{resp: resp, sse: newSSEReader(resp.Body), streamID: resp.Header.Get("X-Relay-Stream-Id")}, nil
}

// streamResult is what a client saw of one stream.
type streamResult struct {
	Start    time.Time // request sent
	Opened   time.Time // response headers
	First    time.Time // first event with content
	StreamID string
	Text     string
	Chunks   int             // events with content
	Gaps     []time.Duration // between events with content, if asked for
	IDs      []string        // cursors of the events with content, if asked for
	Finish   string
	Status   string // relay's terminal status; empty from the fake upstream
	Done     bool   // [DONE] arrived
	Err      error
}

// streamOpts says what runStream records besides the totals.
type streamOpts struct {
	gaps, ids bool
	// onOpen is called once the response headers are in.
	onOpen func(*opened)
	// onEvent sees every event as it arrives.
	onEvent func(ev *event, at time.Time)
}

// runStream sends one streaming chat request and reads it to the end.
func runStream(ctx context.Context, hc *http.Client, url string, conv conversation, o streamOpts) streamResult {
	r := streamResult{Start: time.Now()}
	s, err := open(ctx, hc, http.MethodPost, url, conv.body, "")
	if err != nil {
		r.Err = err
		return r
	}
	defer s.Close()
	r.Opened, r.StreamID = time.Now(), s.streamID
	if o.onOpen != nil {
		o.onOpen(s)
	}
	r.Err = r.read(s, o)
	return r
}

// read consumes events until [DONE] or an error.
func (r *streamResult) read(s *opened, o streamOpts) error {
	var text strings.Builder
	defer func() { r.Text = text.String() }()
	var ev event
	last := time.Time{}
	for {
		if err := s.sse.next(&ev); err != nil {
			return fmt.Errorf("after %d chunks: %w", r.Chunks, err)
		}
		at := time.Now()
		if o.onEvent != nil {
			o.onEvent(&ev, at)
		}
		switch {
		case ev.Done:
			r.Done = true
			return nil
		case ev.Error != "":
			r.Status = ev.Status
			return fmt.Errorf("stream failed (%s): %s", ev.Status, ev.Error)
		case ev.Content != "":
			if r.Chunks == 0 {
				r.First = at
			} else if o.gaps {
				r.Gaps = append(r.Gaps, at.Sub(last))
			}
			if o.ids {
				r.IDs = append(r.IDs, ev.ID)
			}
			last = at
			r.Chunks++
			text.WriteString(ev.Content)
		}
		if ev.Finish != "" {
			r.Finish, r.Status = ev.Finish, ev.Status
		}
	}
}

// exact reports whether the stream delivered want completely and ended
// well.
func (r *streamResult) exact(want string) bool {
	return r.Err == nil && r.Done && r.Finish != "" && (r.Status == "" || r.Status == "done") && r.Text == want
}

// TTFT is the time from sending the request to the first content.
func (r *streamResult) TTFT() time.Duration { return r.First.Sub(r.Start) }
