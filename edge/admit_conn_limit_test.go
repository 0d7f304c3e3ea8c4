package edge

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// dialEdge opens a real TCP connection to te.
func dialEdge(t *testing.T, te *testEdge) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(te.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	// A bound for the test only: the edge must act long before it.
	c.SetDeadline(time.Now().Add(10 * time.Second))
	return c
}

// healthz sends GET /healthz on c and returns the answer.
func healthz(t *testing.T, c net.Conn) (*http.Response, error) {
	t.Helper()
	if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: relay\r\n\r\n"); err != nil {
		return nil, err
	}
	return http.ReadResponse(bufio.NewReader(c), nil)
}

// TestConnectionCapHolds: connections that are busy (here each in the
// middle of sending its request) hold the cap; one over it is refused with
// a 503 and closed. Once a held one is done with its request it is idle,
// and the next new connection takes its place.
func TestConnectionCapHolds(t *testing.T) {
	e := newEnv(t)
	te := e.startEdge(Config{MaxConnections: 2})
	held := []net.Conn{dialEdge(t, te), dialEdge(t, te)}
	for _, c := range held {
		if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: relay\r\n"); err != nil {
			t.Fatal(err)
		}
	}
	// The edge accepts in order: both hold their slots when the next comes.

	over := dialEdge(t, te)
	br := bufio.NewReader(over)
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("the connection over the cap got no answer: %v", err)
	}
	if got := decodeError(t, res); res.StatusCode != http.StatusServiceUnavailable || got.Code != CodeTooManyConnections ||
		res.Header.Get("Retry-After") == "" {
		t.Fatalf("over the cap: status %d, Retry-After %q, error %+v; want 503 %s", res.StatusCode, res.Header.Get("Retry-After"), got, CodeTooManyConnections)
	}
	expectClosed(t, br)

	// The held connections still work; once one is idle, a new one is
	// served in its place.
	if _, err := io.WriteString(held[0], "\r\n"); err != nil {
		t.Fatal(err)
	}
	if res, err := http.ReadResponse(bufio.NewReader(held[0]), nil); err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("a held connection: %v, %v", res, err)
	}
	// net/http tells the listener the connection is idle a moment after
	// the response went out; until then a new one is refused.
	waitFor(t, func() bool {
		res, err := healthz(t, dialEdge(t, te))
		return err == nil && res.StatusCode == http.StatusOK
	})
}

// TestConnectionCapReclaimsAnIdleConnection: at the cap, a new connection
// is served in the place of one kept alive idle, which the edge closes; a
// busy one is left to finish its request.
func TestConnectionCapReclaimsAnIdleConnection(t *testing.T) {
	e := newEnv(t)
	te := e.startEdge(Config{MaxConnections: 2})
	idle, busy := dialEdge(t, te), dialEdge(t, te)
	idleBr := bufio.NewReader(idle)
	if _, err := io.WriteString(idle, "GET /healthz HTTP/1.1\r\nHost: relay\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(idleBr, nil)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("a connection under the cap: %v, %v", res, err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if _, err := io.WriteString(busy, "GET /healthz HTTP/1.1\r\nHost: relay\r\n"); err != nil {
		t.Fatal(err)
	}

	waitFor(t, func() bool {
		res, err := healthz(t, dialEdge(t, te))
		return err == nil && res.StatusCode == http.StatusOK
	})
	expectClosed(t, idleBr)
	if _, err := io.WriteString(busy, "\r\n"); err != nil {
		t.Fatal(err)
	}
	if res, err := http.ReadResponse(bufio.NewReader(busy), nil); err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("the busy connection: %v, %v", res, err)
	}
}

// TestReclaimIdleClosesTheIdlest: of the connections idle, the listener
// closes the one idle longest, a given-back one included, and says when
// there is none.
func TestReclaimIdleClosesTheIdlest(t *testing.T) {
	l := newReuseListener(nil)
	conn := func() (*keptConn, net.Conn) {
		a, b := net.Pipe()
		t.Cleanup(func() { a.Close(); b.Close() })
		return &keptConn{Conn: a, l: l}, b
	}
	closed := func(peer net.Conn) bool {
		peer.SetReadDeadline(time.Now().Add(time.Second))
		_, err := peer.Read(make([]byte, 1))
		return errors.Is(err, io.EOF)
	}
	first, firstPeer := conn()
	second, secondPeer := conn()
	third, thirdPeer := conn()
	l.connState(first, http.StateIdle)
	if !l.wait(second) { // given back, waiting for its next request
		t.Fatal("the listener is closed")
	}
	l.connState(third, http.StateIdle)
	l.connState(first, http.StateActive) // its client sent a request

	for _, peer := range []net.Conn{secondPeer, thirdPeer} {
		if !l.reclaimIdle() || !closed(peer) {
			t.Fatal("an idle connection was not closed, in the order they became idle")
		}
	}
	if l.reclaimIdle() {
		t.Fatal("reclaimed a connection that was not idle")
	}
	if closed(firstPeer) {
		t.Fatal("the active connection was closed")
	}
}
