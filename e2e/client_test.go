package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/relaydev/relay/relay/mockupstream"
	"github.com/relaydev/relay/relay/wire"
)

// prompt builds a one-message conversation and the text the fake upstream
// answers it with.
func prompt(text string, tokens int) ([]mockupstream.Message, string) {
	msgs := []mockupstream.Message{{Role: "user", Content: text}}
	return msgs, mockupstream.AnswerText(msgs, tokens)
}

func chatBody(t testing.TB, msgs []mockupstream.Message, stream bool) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{"model": "mock-1", "stream": stream, "messages": msgs})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// sseEvent is one event of an SSE response.
type sseEvent struct{ ID, Data string }

// sseStream reads the events of one SSE response.
type sseStream struct {
	resp *http.Response
	r    *bufio.Reader
}

// openSSE sends a request and returns its event stream, or the response's
// status and body as an error when it is not a stream.
func openSSE(ctx context.Context, method, url string, body []byte, lastEventID string) (*sseStream, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return nil, &httpError{Status: resp.StatusCode, Body: string(b)}
	}
	return sseOf(resp), nil
}

// sseOf reads the events of resp.
func sseOf(resp *http.Response) *sseStream {
	return &sseStream{resp: resp, r: bufio.NewReader(resp.Body)}
}

type httpError struct {
	Status int
	Body   string
}

func (e *httpError) Error() string { return fmt.Sprintf("HTTP %d: %s", e.Status, e.Body) }

// Next returns the next event, skipping comments and retry hints.
func (s *sseStream) Next() (sseEvent, error) {
	var ev sseEvent
	var data []string
	for {
		line, err := s.r.ReadString('\n')
		if err != nil {
			return sseEvent{}, err
		}
		line = strings.TrimRight(line, "\r\n")
		switch {
		case line == "":
			if data != nil {
				ev.Data = strings.Join(data, "\n")
				return ev, nil
			}
		case strings.HasPrefix(line, ":"), strings.HasPrefix(line, "retry:"):
		case strings.HasPrefix(line, "id:"):
			ev.ID = strings.TrimPrefix(strings.TrimPrefix(line, "id:"), " ")
		case strings.HasPrefix(line, "data:"):
			data = append(data, strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
		}
	}
}

func (s *sseStream) Close() { s.resp.Body.Close() }

// chunkJSON is the part of a chat.completion.chunk (or error event) the
// tests look at.
type chunkJSON struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Model   string `json:"model"`
	Choices []struct {
		Delta struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *wire.Usage `json:"usage"`
	Error *struct {
		Message string `json:"message"`
		Type    string `json:"type"`
		Code    string `json:"code"`
	} `json:"error"`
	Relay struct {
		StreamID string `json:"stream_id"`
		Seq      uint64 `json:"seq"`
		Status   string `json:"status"`
		Provider string `json:"provider"`
		Model    string `json:"model"`
		// RequestedModel is set when the model that answered is not
		// the one asked for.
		RequestedModel string    `json:"requested_model"`
		Attempt        int       `json:"attempt"`
		Seam           wire.Seam `json:"seam"`
		Attempts       int       `json:"attempts"`
		Cost           float64   `json:"cost"`
	} `json:"relay"`
}

// transcript accumulates what a client received over one or more
// connections, and checks that sequences never repeat or skip, and that
// each event's id is a sealed cursor of its own.
type transcript struct {
	text    strings.Builder
	lastSeq uint64
	lastID  string
	finish  string
	status  string
	errType string
	done    bool // [DONE] received
	events  int
}

// add records one event; a duplicate or a gap is an error.
func (tr *transcript) add(ev sseEvent) error {
	if tr.done {
		return fmt.Errorf("event %q after [DONE]", ev.Data)
	}
	if ev.Data == "[DONE]" {
		tr.done = true
		return nil
	}
	if len(ev.ID) != wire.SealedCursorLen || ev.ID == tr.lastID {
		return fmt.Errorf("event id %q after %q: not a sealed cursor of its own", ev.ID, tr.lastID)
	}
	var ch chunkJSON
	if err := json.Unmarshal([]byte(ev.Data), &ch); err != nil {
		return fmt.Errorf("event %s: %v: %s", ev.ID, err, ev.Data)
	}
	if ch.Relay.Seq != tr.lastSeq+1 {
		return fmt.Errorf("event %s carries relay.seq %d after %d: not the next event", ev.ID, ch.Relay.Seq, tr.lastSeq)
	}
	tr.lastSeq, tr.lastID = ch.Relay.Seq, ev.ID
	tr.events++
	if ch.Error != nil {
		tr.errType, tr.status = ch.Error.Type, ch.Relay.Status
		return nil
	}
	if len(ch.Choices) > 0 {
		tr.text.WriteString(ch.Choices[0].Delta.Content)
		if f := ch.Choices[0].FinishReason; f != nil {
			tr.finish, tr.status = *f, ch.Relay.Status
		}
	}
	return nil
}

// readUntil reads events from s into tr until [DONE] or until tr holds
// stop events (stop 0: no limit).
func (tr *transcript) readUntil(s *sseStream, stop int) error { return tr.follow(s, stop, nil) }

// follow is readUntil that also hands each event, once tr has checked
// and added it, to each (if set).
func (tr *transcript) follow(s *sseStream, stop int, each func(sseEvent) error) error {
	for !tr.done && (stop == 0 || tr.events < stop) {
		ev, err := s.Next()
		if err != nil {
			return fmt.Errorf("stream ended before [DONE] after %d events: %w", tr.events, err)
		}
		if err := tr.add(ev); err != nil {
			return err
		}
		if each != nil {
			if err := each(ev); err != nil {
				return err
			}
		}
	}
	return nil
}

// must fails the test on err.
func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }
