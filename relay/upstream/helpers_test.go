package upstream

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// sseServer serves an event stream written by hand: each piece is written
// and flushed on its own, so the client sees the provider's exact bytes and,
// as far as TCP allows, its read boundaries.
func sseServer(t *testing.T, pieces ...string) *httptest.Server {
	t.Helper()
	return newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		rc := http.NewResponseController(w)
		for _, p := range pieces {
			if _, err := io.WriteString(w, p); err != nil {
				return
			}
			if err := rc.Flush(); err != nil {
				return
			}
		}
	})
}

// newServer starts h and closes the server at the end of the test.
func newServer(t *testing.T, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// newAbortServer is newServer that also reports, by closing the channel it
// returns, that a connection to it closed: a client that gives up on a
// request closes its connection, whether or not the request reached the
// handler (on a loaded machine a bound of milliseconds can run out while
// the request is still being sent, and then no handler ever runs).
func newAbortServer(t *testing.T, h http.HandlerFunc) (*httptest.Server, <-chan struct{}) {
	t.Helper()
	closed := make(chan struct{})
	var once sync.Once
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateClosed || st == http.StateHijacked {
			once.Do(func() { close(closed) })
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, closed
}

// openStream opens a stream against srv with c and closes it at the end of
// the test.
func openStream(t *testing.T, c *Client, srv *httptest.Server) *Stream {
	t.Helper()
	s, err := c.Stream(t.Context(), Target{Provider: "test", BaseURL: srv.URL, APIKey: "k"}, []byte(`{}`))
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// readAll collects the stream's content until Next fails and returns the
// content and the final error.
func readAll(s *Stream) (string, error) {
	var b strings.Builder
	for {
		d, err := s.Next()
		if err != nil {
			return b.String(), err
		}
		b.WriteString(d.Content)
	}
}

// chunkData is the data of a chunk with content and, when non-empty, a
// finish_reason.
func chunkData(content, finish string) string {
	fr := "null"
	if finish != "" {
		fr = `"` + finish + `"`
	}
	return `{"id":"c1","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"content":"` + content + `"},"finish_reason":` + fr + `}]}`
}

// wantErr fails the test unless errors.Is(err, target).
func wantErr(t *testing.T, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("error = %v, want one wrapping %v", err, target)
	}
}

// waitGone blocks a handler until the client goes away or the test ends,
// standing in for a provider that stopped sending.
func waitGone(t *testing.T, r *http.Request) {
	select {
	case <-r.Context().Done():
	case <-t.Context().Done():
	}
}

// ctxCanceled returns a context that is already cancelled.
func ctxCanceled() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}
