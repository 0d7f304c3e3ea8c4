//go:build linux

package edge

import (
	"io"
	"net"
	"testing"
	"time"

	"github.com/relaydev/relay/relay/relaytest"
)

// tcpPair is a connected pair of loopback TCP connections.
func tcpPair(t *testing.T) (server, client net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server, err = ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { server.Close(); client.Close() })
	return server, client
}

func hangupsRunning() bool {
	hangupsMu.Lock()
	defer hangupsMu.Unlock()
	return theHangups != nil
}

// A client's hang-up is told; once no connection is watched, the watching
// goroutine ends, and the next watch starts another.
func TestHangupWatchEndsWithTheLastConnection(t *testing.T) {
	for round := range 2 {
		a, aClient := tcpPair(t)
		b, _ := tcpPair(t)
		hungUp := make(chan struct{})
		stopA, okA := watchHangup(a, func() { close(hungUp) })
		stopB, okB := watchHangup(b, func() { t.Error("b's client did not hang up") })
		if !okA || !okB {
			t.Fatalf("round %d: connections not watched", round)
		}
		aClient.Close()
		select {
		case <-hungUp:
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: hang-up not told", round)
		}
		stopA(true)
		stopA(true) // a second stop does nothing
		if !hangupsRunning() {
			t.Fatalf("round %d: stopped watching with b still watched", round)
		}
		stopB(true)
		relaytest.Eventually(t, 10*time.Second, time.Millisecond, func() bool { return !hangupsRunning() })
	}
}

// What a client sends while its connection is watched is not a hang-up,
// and stop(false) leaves it in the socket: the next request on a
// connection kept alive (serve_keepalive.go). (On loopback a write returns once
// its bytes are in the peer's socket.)
func TestHangupWatchLeavesTheNextRequestInTheSocket(t *testing.T) {
	a, aClient := tcpPair(t)
	stop, ok := watchHangup(a, func() { t.Error("a request taken for a hang-up") })
	if !ok {
		t.Fatal("connection not watched")
	}
	const next = "GET /v1/models HTTP/1.1\r\nHost: edge\r\n\r\n"
	if _, err := aClient.Write([]byte(next)); err != nil {
		t.Fatal(err)
	}
	stop(false)
	a.SetReadDeadline(time.Now().Add(10 * time.Second))
	got := make([]byte, len(next))
	if _, err := io.ReadFull(a, got); err != nil || string(got) != next {
		t.Fatalf("read %q, %v", got, err)
	}
}
