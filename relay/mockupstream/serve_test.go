package mockupstream

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"net"
	"net/http"
	"testing"
	"time"
)

// TestServeShutsDownGracefully runs Serve on a real listener and cancels
// it while a stream is stalled: the stream still ends properly and Serve
// returns nil once it has.
func TestServeShutsDownGracefully(t *testing.T) {
	_, ln, cancel, served := serving(t, fullSpeed(3))
	defer cancel()

	reqBody, err := json.Marshal(chatBody(true, conv("[[mock: stall_after=1, stall_for=100ms]]")))
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://"+ln.Addr().String()+"/v1/chat/completions", bytes.NewReader(reqBody))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body := bufio.NewReader(resp.Body)
	if _, err := body.ReadString('\n'); err != nil {
		t.Fatalf("first line: %v", err)
	}
	cancel() // while the stream is running

	var r streamResult
	if err := readSSE(t, body, &r); err != nil || !r.done || len(r.content()) != 3 {
		t.Fatalf("stream during shutdown: err %v, done %v, %d tokens", err, r.done, len(r.content()))
	}
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("Serve: %v", err)
		}
	case <-time.After(shutdownGrace):
		t.Fatal("Serve did not return after its context was done")
	}
	if conn, err := net.Dial("tcp", ln.Addr().String()); err == nil {
		conn.Close()
		t.Fatal("listener still accepts after Serve returned")
	}
}

// Serve answers HTTP/1.1 and h2c with prior knowledge on one port, and
// its faults fail an h2c stream as they fail an HTTP/1.1 one: a cut is a
// reset stream, an error, not a clean end; a status is that status.
func TestServeSpeaksHTTP1AndH2COnOnePort(t *testing.T) {
	s, ln, cancel, served := serving(t, fullSpeed(10))
	defer func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()
	h2c := &http.Transport{Protocols: new(http.Protocols)}
	h2c.Protocols.SetUnencryptedHTTP2(true)
	defer h2c.CloseIdleConnections()
	h1 := &http.Transport{}
	defer h1.CloseIdleConnections()
	url := "http://" + ln.Addr().String() + "/v1/chat/completions"

	whole := conv("whole")
	for _, rt := range []http.RoundTripper{h1, h2c} {
		if r := streamOver(t, rt, url, chatBody(true, whole)); r.err != nil || !r.done || r.text() != AnswerText(whole, 10) {
			t.Fatalf("clean stream: err %v, done %v, text %q", r.err, r.done, r.text())
		}
	}
	cut := conv("[[mock: cut_after=3, times=9]]")
	if r := streamOver(t, h2c, url, chatBody(true, cut)); r.err == nil || r.done || r.finish() != "" || r.text() != AnswerText(cut, 3) {
		t.Fatalf("cut h2c stream: err %v, done %v, finish %q, text %q; want an error after 3 tokens", r.err, r.done, r.finish(), r.text())
	}
	limited := conv("[[mock: status=429, retry_after=2]]")
	if r := streamOver(t, h2c, url, chatBody(true, limited)); r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") != "2" {
		t.Fatalf("429 over h2c: status %d, Retry-After %q", r.status, r.header.Get("Retry-After"))
	}
	if got, want := s.Stats().ByProtocol, map[string]int{"HTTP/1.1": 1, "HTTP/2.0": 3}; !maps.Equal(got, want) {
		t.Fatalf("requests by protocol %v, want %v", got, want)
	}
}

// serving runs a Server of cfg with Serve on a listener of its own until
// cancel is called; served receives what Serve returned.
func serving(t *testing.T, cfg Config) (*Server, net.Listener, context.CancelFunc, <-chan error) {
	t.Helper()
	s, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, ln) }()
	return s, ln, cancel, served
}

// streamOver posts a streaming request to url through rt and reads the
// whole response, as stream does.
func streamOver(t *testing.T, rt http.RoundTripper, url string, body map[string]any) streamResult {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, bytes.NewReader(mustMarshal(t, body)))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	r := streamResult{status: resp.StatusCode, header: resp.Header}
	if resp.StatusCode == http.StatusOK {
		r.err = readSSE(t, resp.Body, &r)
	}
	return r
}
