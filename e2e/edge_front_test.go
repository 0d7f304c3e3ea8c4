package e2e

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"strings"
	"sync"
	"testing"
	"time"
)

// edgeFront is a load balancer in front of edges, as operators run one:
// each request goes to the next edge in turn, on a connection of its own.
// A request is sent to another edge only when it cannot have been served
// by the first: its connection could not be made (the edge is down or
// its listener closed), or a draining edge refused it before doing
// anything (503 with code edge_draining, serve_drain.go). Anything else,
// a failure mid-response included, reaches the client as it happened.
type edgeFront struct {
	URL string

	mu    sync.Mutex
	edges []string // host:port, by slot
	next  int
	// retried counts the requests sent to another edge, by reason.
	retried map[string]int

	tr *http.Transport
}

// startEdgeFront serves a front over edges (URLs "http://host:port") until
// the test ends.
func startEdgeFront(t *testing.T, edges ...string) *edgeFront {
	t.Helper()
	f := &edgeFront{retried: map[string]int{}, tr: &http.Transport{
		DialContext:       (&net.Dialer{Timeout: 2 * time.Second}).DialContext,
		DisableKeepAlives: true,
		// The client's Accept-Encoding, if any, passes as it is.
		DisableCompression: true,
	}}
	for _, e := range edges {
		f.edges = append(f.edges, strings.TrimPrefix(e, "http://"))
	}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme, pr.Out.URL.Host = "http", "edge" // RoundTrip picks the edge
		},
		Transport:     f,
		FlushInterval: -1, // SSE and long-polls pass at once
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			t.Logf("front: %s %s: %v", r.Method, r.URL, err)
			w.WriteHeader(http.StatusBadGateway)
		},
	}
	srv := httptest.NewServer(proxy)
	t.Cleanup(srv.Close)
	t.Cleanup(f.tr.CloseIdleConnections)
	f.URL = srv.URL
	return f
}

// setEdge replaces the edge of slot i, restarted on a new port.
func (f *edgeFront) setEdge(i int, url string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.edges[i] = strings.TrimPrefix(url, "http://")
}

// retries returns how many requests went to another edge, by reason.
func (f *edgeFront) retries() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]int{}
	for k, v := range f.retried {
		out[k] = v
	}
	return out
}

// order is the edges to try for one request: the next in turn first.
func (f *edgeFront) order() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := len(f.edges)
	out := make([]string, 0, n)
	for i := range n {
		out = append(out, f.edges[(f.next+i)%n])
	}
	f.next = (f.next + 1) % n
	return out
}

func (f *edgeFront) retry(reason string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.retried[reason]++
}

// RoundTrip sends req to the first edge that takes it.
func (f *edgeFront) RoundTrip(req *http.Request) (*http.Response, error) {
	// The body is held so that it can be sent again; the suite's are
	// small enough.
	var body []byte
	if req.Body != nil {
		var err error
		if body, err = io.ReadAll(req.Body); err != nil {
			return nil, err
		}
		req.Body.Close()
	}
	var lastErr error
	for _, addr := range f.order() {
		out := req.Clone(req.Context())
		out.URL.Host, out.Host = addr, addr
		if req.Body != nil {
			out.Body, out.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
			out.TransferEncoding = nil
		}
		resp, err := f.tr.RoundTrip(out)
		var op *net.OpError
		switch {
		case errors.As(err, &op) && op.Op == "dial":
			f.retry("connection refused")
			lastErr = err
			continue
		case err != nil:
			return nil, err
		}
		if refused, err := drainRefused(resp); err != nil {
			return nil, err
		} else if refused {
			f.retry("edge draining")
			lastErr = errors.New(addr + " is draining")
			continue
		}
		return resp, nil
	}
	return nil, lastErr
}

// drainRefused reports whether resp is a draining edge's refusal, which
// did nothing; otherwise resp is left as it came.
func drainRefused(resp *http.Response) (bool, error) {
	if resp.StatusCode != http.StatusServiceUnavailable {
		return false, nil
	}
	head, err := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	if err != nil {
		resp.Body.Close()
		return false, err
	}
	if bytes.Contains(head, []byte(`"code":"edge_draining"`)) {
		resp.Body.Close()
		return true, nil
	}
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(head), resp.Body), resp.Body}
	return false, nil
}
