package mockupstream

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"testing"
	"time"
)

// TestServeShutsDownGracefully runs Serve on a real listener and cancels
// it while a stream is stalled: the stream still ends properly and Serve
// returns nil once it has.
func TestServeShutsDownGracefully(t *testing.T) {
	s, err := New(fullSpeed(3), nil)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, ln) }()

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
