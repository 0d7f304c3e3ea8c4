package edge

import (
	"bufio"
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
	if got := decodeError(t, res); res.StatusCode != http.StatusServiceUnavailable || deref(got.Code) != CodeTooManyConnections ||
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
	if res, err := healthz(t, dialEdge(t, te)); err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("a new connection at the cap, with one idle: %v, %v", res, err)
	}
}

// TestConnectionCapReclaimsTheIdlest: at the cap, a new connection is
// served in the place of the one kept alive idle the longest, which the
// edge closes; the other idle one goes on serving its client.
func TestConnectionCapReclaimsTheIdlest(t *testing.T) {
	e := newEnv(t)
	te := e.startEdge(Config{MaxConnections: 2})
	oldest, newer := dialEdge(t, te), dialEdge(t, te)
	oldBr := bufio.NewReader(oldest)
	for _, c := range []net.Conn{oldest, newer} {
		var res *http.Response
		var err error
		if c == oldest {
			_, err = io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: relay\r\n\r\n")
			if err == nil {
				res, err = http.ReadResponse(oldBr, nil)
			}
		} else {
			res, err = healthz(t, c)
		}
		if err != nil || res.StatusCode != http.StatusOK {
			t.Fatalf("a connection under the cap: %v, %v", res, err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
	}

	if res, err := healthz(t, dialEdge(t, te)); err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("a new connection at the cap, two idle: %v, %v", res, err)
	}
	expectClosed(t, oldBr)
	if res, err := healthz(t, newer); err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("the newer idle connection: %v, %v", res, err)
	}
}
