package edge

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/relaydev/relay/relay/relaytest"
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

func TestConnectionCapHolds(t *testing.T) {
	e := newEnv(t)
	te := e.startEdge(Config{MaxConnections: 2})
	held := []net.Conn{dialEdge(t, te), dialEdge(t, te)}
	for _, c := range held {
		if res, err := healthz(t, c); err != nil || res.StatusCode != http.StatusOK {
			t.Fatalf("a connection under the cap: %v, %v", res, err)
		}
	}

	over := dialEdge(t, te)
	br := bufio.NewReader(over)
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("the connection over the cap got no answer: %v", err)
	}
	if got := decodeError(t, res); res.StatusCode != http.StatusServiceUnavailable || deref(got.Code) != CodeTooManyConnections ||
		res.Header.Get("Retry-After") == "" {
		t.Fatalf("over the cap: status %d, Retry-After %q, error %+v; want 503 %s", res.StatusCode, res.Header.Get("Retry-After"), got, CodeTooManyConnections)
	}
	expectClosed(t, br)

	// The held connections still work; once one closes, a new one is served.
	if res, err := healthz(t, held[1]); err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("a held connection: %v, %v", res, err)
	}
	held[0].Close()
	relaytest.Eventually(t, 5*time.Second, 10*time.Millisecond, func() bool {
		res, err := healthz(t, dialEdge(t, te))
		return err == nil && res.StatusCode == http.StatusOK
	})
}
