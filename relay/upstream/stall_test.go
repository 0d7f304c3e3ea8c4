package upstream

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// pipeTransport answers each request with an event stream whose bytes the
// test writes through the returned pipe, and, like a real transport, breaks
// the body when the request's context ends. Inside a synctest bubble it lets
// the stall bounds run on the fake clock.
type pipeTransport chan *io.PipeWriter

func (p pipeTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	pr, pw := io.Pipe()
	context.AfterFunc(req.Context(), func() { pr.CloseWithError(context.Cause(req.Context())) })
	p <- pw
	return &http.Response{
		StatusCode: http.StatusOK,
		Header:     http.Header{"Content-Type": {"text/event-stream"}},
		Body:       pr,
		Request:    req,
	}, nil
}

// silentTransport never answers; it gives up when the request's context ends.
type silentTransport struct{}

func (silentTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	<-req.Context().Done()
	return nil, req.Context().Err()
}

// pipeStream opens a stream through a pipeTransport with c's bounds and
// returns it with the pipe that feeds its body.
func pipeStream(t *testing.T, c Client) (*Stream, *io.PipeWriter) {
	t.Helper()
	p := make(pipeTransport, 1)
	c.HTTPClient = &http.Client{Transport: p}
	s, err := c.Stream(t.Context(), Target{Provider: "p"}, nil)
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, <-p
}

// write sends s to the stream from a goroutine after wait, so the test
// goroutine can block in Next meanwhile.
func write(pw *io.PipeWriter, wait time.Duration, s string) {
	go func() {
		time.Sleep(wait)
		_, _ = io.WriteString(pw, s)
	}()
}

func TestFirstByteTimeoutBeforeHeaders(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := Client{HTTPClient: &http.Client{Transport: silentTransport{}}, FirstByteTimeout: 30 * time.Second, StallTimeout: time.Second}
		start := time.Now()
		_, err := c.Stream(t.Context(), Target{}, nil)
		wantErr(t, err, ErrStalled)
		if d := time.Since(start); d != 30*time.Second {
			t.Fatalf("stalled after %v, want 30s", d)
		}
	})
}

func TestFirstByteTimeoutAfterHeaders(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		s, _ := pipeStream(t, Client{FirstByteTimeout: 30 * time.Second, StallTimeout: time.Second})
		_, err := s.Next()
		wantErr(t, err, ErrStalled)
		if d := time.Since(start); d != 30*time.Second {
			t.Fatalf("stalled after %v, want 30s: headers are not the first byte", d)
		}
	})
}

func TestDefaultBounds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		s, pw := pipeStream(t, Client{})
		write(pw, time.Minute, "data: "+chunkData("a", "")+"\n\n")
		if _, err := s.Next(); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Next(); !errors.Is(err, ErrStalled) {
			t.Fatalf("Next = %v, want ErrStalled", err)
		}
		if d := time.Since(start); d != time.Minute+DefaultStallTimeout {
			t.Fatalf("stalled after %v, want %v", d, time.Minute+DefaultStallTimeout)
		}
	})
}

func TestStallTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, pw := pipeStream(t, Client{FirstByteTimeout: time.Minute, StallTimeout: 5 * time.Second})
		write(pw, 50*time.Second, "data: "+chunkData("a", "")+"\n\n")
		if d, err := s.Next(); err != nil || d.Content != "a" {
			t.Fatalf("Next = %+v, %v", d, err)
		}
		last := time.Now()
		_, err := s.Next()
		wantErr(t, err, ErrStalled)
		if Classify(err) != Transient {
			t.Fatalf("Classify(%v) = %v", err, Classify(err))
		}
		if d := time.Since(last); d != 5*time.Second {
			t.Fatalf("stalled %v after the last byte, want 5s", d)
		}
	})
}

// The stall bound is not reset per read but re-armed when it runs out, for
// what it has left: it still runs out exactly StallTimeout after the last
// byte, not after the first byte or the one before the last.
func TestStallCountsFromTheLastByte(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, pw := pipeStream(t, Client{StallTimeout: 5 * time.Second})
		write(pw, 0, "data: "+chunkData("a", "")+"\n\n")
		if _, err := s.Next(); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		go func() {
			for _, wait := range []time.Duration{3 * time.Second, 4 * time.Second, time.Second} {
				time.Sleep(wait)
				_, _ = io.WriteString(pw, ": ping\n\n")
			}
		}()
		_, err := s.Next()
		wantErr(t, err, ErrStalled)
		if d := time.Since(start); d != 13*time.Second {
			t.Fatalf("stalled %v after the first byte, want 13s: 5s after the last, at 8s", d)
		}
	})
}

// Any byte is life: keep-alive comments, and a large event that trickles in.
func TestStallBoundCountsBytes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, pw := pipeStream(t, Client{StallTimeout: 5 * time.Second})
		go func() {
			for range 10 {
				time.Sleep(4 * time.Second)
				_, _ = io.WriteString(pw, ": keep-alive\n\n")
			}
			for _, b := range "data: " + chunkData("slow", "stop") + "\n\n" {
				time.Sleep(4 * time.Second)
				_, _ = io.WriteString(pw, string(b))
			}
			_, _ = io.WriteString(pw, "data: [DONE]\n\n")
		}()
		content, err := readAll(s)
		if err != io.EOF || content != "slow" {
			t.Fatalf("readAll = %q, %v; want slow, io.EOF", content, err)
		}
	})
}

// Keep-alives keep the connection, not the answer: once content flowed,
// a stream that sends only comments for ContentStallTimeout is stalled,
// though bytes never stop.
func TestContentStallDespiteKeepAlives(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, pw := pipeStream(t, Client{StallTimeout: 5 * time.Second, ContentStallTimeout: 20 * time.Second})
		write(pw, 0, "data: "+chunkData("a", "")+"\n\n")
		if _, err := s.Next(); err != nil {
			t.Fatal(err)
		}
		last := time.Now()
		stop, stopped := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(stopped)
			for {
				select {
				case <-stop:
					return
				case <-time.After(3 * time.Second):
					_, _ = io.WriteString(pw, ": keep-alive\n\n")
				}
			}
		}()
		_, err := s.Next()
		close(stop)
		<-stopped
		wantErr(t, err, ErrStalled)
		if d := time.Since(last); d != 20*time.Second || !strings.Contains(err.Error(), "no content") {
			t.Fatalf("%v after the last content: %v; want a content stall at 20s", d, err)
		}
	})
}

// Reasoning is progress: a model that streams its thinking for longer
// than the content bound, between two pieces of text, is not stalled.
func TestReasoningIsContent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, pw := pipeStream(t, Client{StallTimeout: 15 * time.Second, ContentStallTimeout: 20 * time.Second})
		go func() {
			_, _ = io.WriteString(pw, "data: "+chunkData("a", "")+"\n\n")
			for range 6 {
				time.Sleep(10 * time.Second)
				_, _ = io.WriteString(pw, `data: {"choices":[{"index":0,"delta":{"reasoning_content":"hm"},"finish_reason":null}]}`+"\n\n")
			}
			_, _ = io.WriteString(pw, "data: "+chunkData("b", "stop")+"\n\ndata: [DONE]\n\n")
		}()
		content, err := readAll(s)
		if err != io.EOF || content != "ab" {
			t.Fatalf("readAll = %q, %v; want ab, io.EOF", content, err)
		}
	})
}

// A provider that finished but never sends [DONE] nor closes is done, not
// stalled.
func TestStallAfterFinish(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, pw := pipeStream(t, Client{StallTimeout: 5 * time.Second})
		write(pw, 0, "data: "+chunkData("a", "length")+"\n\n")
		content, err := readAll(s)
		if err != io.EOF || content != "a" || s.SawDone() || s.FinishReason() != "length" {
			t.Fatalf("readAll = %q, %v, SawDone %v, FinishReason %q", content, err, s.SawDone(), s.FinishReason())
		}
	})
}

func TestNoBounds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, pw := pipeStream(t, Client{FirstByteTimeout: -1, StallTimeout: -1, ContentStallTimeout: -1})
		write(pw, time.Hour, "data: "+chunkData("a", "")+"\n\n")
		if _, err := s.Next(); err != nil {
			t.Fatal(err)
		}
		write(pw, 24*time.Hour, "data: [DONE]\n\n")
		if _, err := s.Next(); err != io.EOF {
			t.Fatalf("Next = %v, want io.EOF", err)
		}
	})
}

// Only the first byte is bounded when the other bounds are off.
func TestFirstByteBoundOnly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, pw := pipeStream(t, Client{FirstByteTimeout: time.Second, StallTimeout: -1, ContentStallTimeout: -1})
		write(pw, 0, "data: "+chunkData("a", "")+"\n\n")
		if _, err := s.Next(); err != nil {
			t.Fatal(err)
		}
		write(pw, time.Hour, "data: [DONE]\n\n")
		if _, err := s.Next(); err != io.EOF {
			t.Fatalf("Next = %v, want io.EOF", err)
		}
	})
}

// Over a real connection, a stall cancels the request: the provider sees
// its connection close (whether or not the request had reached its handler
// when the bound ran out). Only the bound under test is short, so a slow
// machine cannot make the test fail early.
func TestStallAbortsRealRequest(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    Client
		sent string // what the provider sends before going silent
		want string // the content read before the stall
	}{
		{name: "first byte", c: Client{FirstByteTimeout: 20 * time.Millisecond}},
		{name: "mid-stream", c: Client{StallTimeout: 20 * time.Millisecond}, sent: "data: " + chunkData("a", "") + "\n\n", want: "a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, gone := newAbortServer(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				_, _ = io.WriteString(w, tc.sent)
				_ = http.NewResponseController(w).Flush()
				waitGone(t, r)
			})
			// With a short first-byte bound, even the headers may come
			// too late on a loaded machine: either call may stall.
			var content string
			s, err := tc.c.Stream(t.Context(), Target{BaseURL: srv.URL}, nil)
			if err == nil {
				defer s.Close()
				content, err = readAll(s)
			}
			wantErr(t, err, ErrStalled)
			if content != tc.want {
				t.Fatalf("content = %q, want %q", content, tc.want)
			}
			<-gone
		})
	}
}

func TestFirstByteAbortsRealRequestBeforeHeaders(t *testing.T) {
	srv, gone := newAbortServer(t, func(_ http.ResponseWriter, r *http.Request) { waitGone(t, r) })
	_, err := (&Client{FirstByteTimeout: 20 * time.Millisecond}).Stream(t.Context(), Target{BaseURL: srv.URL}, nil)
	wantErr(t, err, ErrStalled)
	<-gone
}
