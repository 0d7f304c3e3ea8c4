package edge

import (
	"bufio"
	"context"
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
// middle of sending its request, with a share of unauthenticated
// connections as large as the cap) hold the cap; one over it is refused with
// a 503 and closed. Once a held one is done with its request it is idle,
// and the next new connection takes its place.
func TestConnectionCapHolds(t *testing.T) {
	e := newEnv(t)
	te := e.startEdge(Config{MaxConnections: 2, MaxUnauthenticatedConnections: 2})
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
	te := e.startEdge(Config{MaxConnections: 2, MaxUnauthenticatedConnections: 2})
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

// holdRequest sends a request's headers on c with a body it never sends,
// and waits for the edge to ask for it (100 Continue): the request has
// been authenticated, and holds its connection until the body deadline.
func holdRequest(t *testing.T, c net.Conn, key string) {
	t.Helper()
	if _, err := io.WriteString(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: relay\r\nAuthorization: Bearer "+key+
		"\r\nContent-Type: application/json\r\nContent-Length: 100\r\nExpect: 100-continue\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || res.StatusCode != http.StatusContinue {
		t.Fatalf("a held request: %v, %v; want 100 Continue", res, err)
	}
}

// models sends GET /v1/models with key on a new connection to te.
func models(t *testing.T, te *testEdge, key string) (*http.Response, *bufio.Reader) {
	t.Helper()
	c := dialEdge(t, te)
	if _, err := io.WriteString(c, "GET /v1/models HTTP/1.1\r\nHost: relay\r\nAuthorization: Bearer "+key+"\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("GET /v1/models: %v", err)
	}
	return res, br
}

// startOps serves te's ops listener and returns its address.
func startOps(t *testing.T, te *testEdge) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- te.ServeOps(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("ServeOps: %v", err)
		}
	})
	return ln.Addr().String()
}

// TestTenantHoldsItsShareOfTheConnections: a tenant whose requests wait on
// every connection it can open holds half the cap; its requests past that
// get a 429 too_many_connections and are closed, and another tenant's
// request is served, as is /healthz on the ops listener.
func TestTenantHoldsItsShareOfTheConnections(t *testing.T) {
	e := newEnv(t)
	cfg := tenantConfig()
	cfg.MaxConnections = 4
	te := e.startEdge(cfg)
	ops := startOps(t, te)
	for range 2 {
		holdRequest(t, dialEdge(t, te), keyAcme)
	}
	for range 3 {
		c := dialEdge(t, te)
		if _, err := io.WriteString(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: relay\r\nAuthorization: Bearer "+keyAcme+
			"\r\nContent-Type: application/json\r\nContent-Length: 100\r\nExpect: 100-continue\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(c)
		res, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("acme's request past its share: %v", err)
		}
		if got := decodeError(t, res); res.StatusCode != http.StatusTooManyRequests || got.Code != CodeTooManyConnections ||
			res.Header.Get("Retry-After") == "" {
			t.Fatalf("acme's request past its share: status %d, Retry-After %q, error %+v; want 429 %s",
				res.StatusCode, res.Header.Get("Retry-After"), got, CodeTooManyConnections)
		}
		expectClosed(t, br)
	}
	if res, _ := models(t, te, keyBeta); res.StatusCode != http.StatusOK {
		t.Fatalf("beta's request while acme holds its share: %d %+v", res.StatusCode, decodeError(t, res))
	}
	res, err := http.Get("http://" + ops + "/healthz")
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("ops /healthz: %v, %v", res, err)
	}
	res.Body.Close()
}

// TestUnauthenticatedConnectionsHaveAShareOfTheirOwn: connections that
// never send a whole request hold half the cap at most, each new one
// closing the oldest, and a tenant's request is served beside them.
func TestUnauthenticatedConnectionsHaveAShareOfTheirOwn(t *testing.T) {
	e := newEnv(t)
	cfg := tenantConfig()
	cfg.MaxConnections = 4
	te := e.startEdge(cfg)
	var flood []*bufio.Reader
	for range 10 {
		c := dialEdge(t, te)
		if _, err := io.WriteString(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: relay\r\n"); err != nil {
			t.Fatal(err)
		}
		flood = append(flood, bufio.NewReader(c))
	}
	res, _ := models(t, te, keyAcme)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("acme's request beside connections that never authenticate: %d %+v", res.StatusCode, decodeError(t, res))
	}
	// Each connection past the cap closed the oldest of the flood's:
	// the first six for the rest of the flood, the seventh for acme's.
	for _, br := range flood[:7] {
		if _, err := br.ReadByte(); !errors.Is(err, io.EOF) && !isReset(err) {
			t.Fatalf("an old unauthenticated connection: %v; want it closed", err)
		}
	}
}

// isReset reports whether err is a connection closed under unread data.
func isReset(err error) bool {
	return err != nil && strings.Contains(err.Error(), "connection reset")
}

// TestOpsHealthAnswersAtTheCap: with the API's listener at its cap (its
// /healthz refused), /healthz and /readyz on the ops listener answer.
func TestOpsHealthAnswersAtTheCap(t *testing.T) {
	e := newEnv(t)
	te := e.startEdge(Config{MaxConnections: 2, AllowedHosts: []string{"relay"}})
	ops := startOps(t, te)
	for range 2 {
		holdRequest(t, dialEdge(t, te), "")
	}
	res, err := healthz(t, dialEdge(t, te))
	if err != nil || res.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("the API's /healthz at the cap: %v, %v; want 503", res, err)
	}
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		res, err := http.Get("http://" + ops + path)
		if err != nil || res.StatusCode != http.StatusOK {
			t.Fatalf("ops %s at the cap: %v, %v", path, res, err)
		}
		res.Body.Close()
	}
}
