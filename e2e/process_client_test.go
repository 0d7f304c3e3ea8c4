package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relaydev/relay/relay/mockupstream"
)

// pevent is one SSE event as the process tests read it: unlike
// sseStream.Next, it keeps the retry hint, which a draining edge sends.
type pevent struct{ ID, Data, Retry string }

func readPEvent(r *bufio.Reader) (pevent, error) {
	var ev pevent
	var data []string
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return pevent{}, err
		}
		line = strings.TrimRight(line, "\r\n")
		switch {
		case line == "":
			if data != nil {
				ev.Data = strings.Join(data, "\n")
				return ev, nil
			}
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "retry:"):
			ev.Retry = strings.TrimSpace(strings.TrimPrefix(line, "retry:"))
		case strings.HasPrefix(line, "id:"):
			ev.ID = strings.TrimPrefix(strings.TrimPrefix(line, "id:"), " ")
		case strings.HasPrefix(line, "data:"):
			data = append(data, strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
		}
	}
}

// errorCode returns the code of an SSE event that is an error object.
func errorCode(data string) string {
	var e struct {
		Error *struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	if json.Unmarshal([]byte(data), &e) != nil || e.Error == nil {
		return ""
	}
	return e.Error.Code
}

// pclient is an SSE client of one stream that survives its connections:
// it records every event with its arrival time and resumes after its last
// cursor on whichever edge it is told to. Its transcript checks that no
// cursor repeats or skips, across connections.
type pclient struct {
	id   string
	want string
	tr   transcript
	at   []time.Time // arrival of each event of tr, in order
	// seams counts the chunks that start an attempt, by seam.
	seams map[string]int
	// resumes counts the connections after the first; broken, the
	// connections that ended without [DONE] and without the client
	// dropping them (by the code of their last event, "eof" if none).
	resumes int
	broken  map[string]int
	// last is the last event without an id (a drain or interruption).
	last pevent
	cur  *sseStream
}

// postStream starts a streaming chat completion on edge.
func postStream(ctx context.Context, edge string, msgs []mockupstream.Message, want string, header http.Header) (*pclient, error) {
	body, err := json.Marshal(map[string]any{"model": "mock-1", "stream": true, "messages": msgs})
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, edge+"/v1/chat/completions", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return nil, &httpError{Status: resp.StatusCode, Body: string(b)}
	}
	c := &pclient{
		id: resp.Header.Get("X-Relay-Stream-Id"), want: want,
		seams: map[string]int{}, broken: map[string]int{},
		cur: &sseStream{resp: resp, r: bufio.NewReader(resp.Body)},
	}
	if c.id == "" {
		resp.Body.Close()
		return nil, errors.New("no X-Relay-Stream-Id")
	}
	return c, nil
}

// errBroken reports a connection that ended before [DONE].
type errBroken struct{ code string }

func (e errBroken) Error() string { return "connection ended before [DONE]: " + e.code }

// next reads one event of the open connection into the transcript. It
// returns errBroken when the connection ended without [DONE] (the edge
// ended it with an event without id, or it broke).
func (c *pclient) next() error {
	ev, err := readPEvent(c.cur.r)
	if err != nil {
		return errBroken{code: "eof"}
	}
	if ev.ID == "" && ev.Data != "[DONE]" {
		c.last = ev
		code := errorCode(ev.Data)
		if code == "" {
			return fmt.Errorf("stream %s: event without id: %q", c.id, ev.Data)
		}
		// The edge ends the response after such an event.
		return errBroken{code: code}
	}
	if err := c.tr.add(sseEvent{ID: ev.ID, Data: ev.Data}); err != nil {
		return fmt.Errorf("stream %s: %w", c.id, err)
	}
	if ev.Data != "[DONE]" {
		c.at = append(c.at, time.Now())
		var ch struct {
			Relay struct {
				Seam string `json:"seam"`
			} `json:"relay"`
		}
		if json.Unmarshal([]byte(ev.Data), &ch) == nil && ch.Relay.Seam != "" {
			c.seams[ch.Relay.Seam]++
		}
	}
	return nil
}

// readN reads until the transcript holds n events or the stream is done.
func (c *pclient) readN(n int) error {
	for !c.tr.done && c.tr.events < n {
		if err := c.next(); err != nil {
			return err
		}
	}
	return nil
}

// close drops the open connection.
func (c *pclient) close() {
	if c.cur != nil {
		c.cur.Close()
		c.cur = nil
	}
}

// resume drops the open connection and follows the stream on edge after
// the last cursor received.
func (c *pclient) resume(ctx context.Context, edge string) error {
	c.close()
	s, err := openSSE(ctx, http.MethodGet, edge+"/v1/streams/"+c.id, nil, c.tr.lastID)
	if err != nil {
		return err
	}
	c.cur = s
	c.resumes++
	return nil
}

// finish reads the stream to its end. When a connection ends before
// [DONE], or drop says so after an event, it resumes on pick()'s edge,
// retrying refused resumes, until ctx ends.
func (c *pclient) finish(ctx context.Context, pick func() string, drop func() bool) error {
	defer c.close()
	for !c.tr.done {
		if c.cur == nil {
			if err := c.resume(ctx, pick()); err != nil {
				if ctx.Err() != nil {
					return fmt.Errorf("stream %s: resume: %w (after %d events)", c.id, err, c.tr.events)
				}
				select {
				case <-ctx.Done():
				case <-time.After(100 * time.Millisecond):
				}
				continue
			}
		}
		err := c.next()
		var broken errBroken
		switch {
		case errors.As(err, &broken):
			c.broken[broken.code]++
			c.close()
			if ctx.Err() != nil {
				return fmt.Errorf("stream %s: %w (after %d events)", c.id, ctx.Err(), c.tr.events)
			}
		case err != nil:
			return err
		case !c.tr.done && drop != nil && drop():
			c.close()
		}
	}
	return nil
}

// check verifies that the client received exactly the fault-free answer
// and that the stream ended done.
func (c *pclient) check() error {
	if got := c.tr.text.String(); got != c.want {
		return fmt.Errorf("stream %s: text differs:\n got %q\nwant %q", c.id, got, c.want)
	}
	if c.tr.status != "done" || c.tr.finish != "stop" || !c.tr.done {
		return fmt.Errorf("stream %s: status %q, finish %q, [DONE] %v; want done, stop, [DONE]", c.id, c.tr.status, c.tr.finish, c.tr.done)
	}
	return nil
}

// firstAfter returns the arrival of the first event after t0.
func (c *pclient) firstAfter(t0 time.Time) (time.Time, bool) {
	for _, at := range c.at {
		if at.After(t0) {
			return at, true
		}
	}
	return time.Time{}, false
}

// maxGap returns the longest time between consecutive events after t0,
// counting from t0 to the first of them.
func (c *pclient) maxGap(t0 time.Time) time.Duration {
	var gap time.Duration
	prev := t0
	for _, at := range c.at {
		if !at.After(t0) {
			continue
		}
		gap = max(gap, at.Sub(prev))
		prev = at
	}
	return gap
}

// upstreamProxy is a TCP proxy between the workers and the fake upstream
// that remembers, per connection, what the worker sent and when the
// connection closed: the fake upstream does not report a request its
// client abandoned, so a cancellation test sees it here.
type upstreamProxy struct {
	t      *testing.T
	ln     net.Listener
	target string

	mu    sync.Mutex
	conns []*proxiedConn
	wg    sync.WaitGroup
}

type proxiedConn struct {
	mu      sync.Mutex
	request []byte // the first bytes the worker sent
	closed  time.Time
}

func newUpstreamProxy(t *testing.T, target string) *upstreamProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &upstreamProxy{t: t, ln: ln, target: target}
	p.wg.Add(1)
	go p.serve()
	return p
}

func (p *upstreamProxy) addr() string { return p.ln.Addr().String() }

func (p *upstreamProxy) close() {
	p.ln.Close()
	p.wg.Wait()
}

func (p *upstreamProxy) serve() {
	defer p.wg.Done()
	for {
		down, err := p.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			down.Close()
			continue
		}
		pc := &proxiedConn{}
		p.mu.Lock()
		p.conns = append(p.conns, pc)
		p.mu.Unlock()
		end := func() {
			pc.mu.Lock()
			if pc.closed.IsZero() {
				pc.closed = time.Now()
			}
			pc.mu.Unlock()
			down.Close()
			up.Close()
		}
		p.wg.Add(2)
		go func() {
			defer p.wg.Done()
			defer end()
			buf := make([]byte, 32<<10)
			for {
				n, err := down.Read(buf)
				if n > 0 {
					pc.mu.Lock()
					if len(pc.request) < 256<<10 {
						pc.request = append(pc.request, buf[:n]...)
					}
					pc.mu.Unlock()
					if _, werr := up.Write(buf[:n]); werr != nil {
						return
					}
				}
				if err != nil {
					return
				}
			}
		}()
		go func() {
			defer p.wg.Done()
			defer end()
			io.Copy(down, up)
		}()
	}
}

// closedFor returns when the connection whose request contains marker
// closed; ok is false if there is none or it is still open.
func (p *upstreamProxy) closedFor(marker string) (closed time.Time, found, ok bool) {
	p.mu.Lock()
	conns := append([]*proxiedConn(nil), p.conns...)
	p.mu.Unlock()
	for _, pc := range conns {
		pc.mu.Lock()
		req, at := pc.request, pc.closed
		pc.mu.Unlock()
		if bytes.Contains(req, []byte(marker)) {
			return at, true, !at.IsZero()
		}
	}
	return time.Time{}, false, false
}
