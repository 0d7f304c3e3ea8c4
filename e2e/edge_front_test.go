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
// its listener closed), a draining edge refused it before doing anything
// (503 with code edge_draining, serve_drain.go), or it is a GET or HEAD
// whose connection closed before any answer (an edge shutting down
// closes a connection it accepted but had not read yet; nginx sends such
// idempotent requests on by default). Anything else, a failure
// mid-response included, reaches the client as it happened.
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
	dialer := &net.Dialer{Timeout: 2 * time.Second}
	f := &edgeFront{retried: map[string]int{}, tr: &http.Transport{
		DialContext:       dialer.DialContext,
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
		// The client's Host passes, as a balancer that keeps it does, so
		// that URLs an edge builds from it name the front.
		out := req.Clone(req.Context())
		out.URL.Host = addr
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
		case err != nil && (req.Method == http.MethodGet || req.Method == http.MethodHead) && req.Context().Err() == nil:
			f.retry("closed before an answer")
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

// The front sends a request to the other edge when the first refuses the
// connection or is draining, with its body, and passes any other answer,
// a 503 that is not a drain included, as it came.
func TestEdgeFrontRetriesOnlyWhatNoEdgeServed(t *testing.T) {
	var served []string
	var mu sync.Mutex
	live := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		served = append(served, r.Method+" "+string(b))
		mu.Unlock()
		if r.URL.Path == "/busy" {
			http.Error(w, `{"error":{"code":"overloaded"}}`, http.StatusServiceUnavailable)
			return
		}
		w.Write(b)
	}))
	defer live.Close()
	draining := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSONStatus(w, http.StatusServiceUnavailable, `{"error":{"message":"draining","code":"edge_draining"}}`)
	}))
	defer draining.Close()
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()

	front := startEdgeFront(t, dead.URL, draining.URL, live.URL)
	for i := range 3 { // each edge first once
		resp, err := http.Post(front.URL+"/echo", "text/plain", strings.NewReader("body "+string(rune('a'+i))))
		must(t, err)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || string(b) != "body "+string(rune('a'+i)) {
			t.Fatalf("request %d: HTTP %d %q, want the live edge's echo", i, resp.StatusCode, b)
		}
	}
	resp, err := http.Get(front.URL + "/busy")
	must(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(b), "overloaded") {
		t.Fatalf("a 503 that is no drain: HTTP %d %q, want it passed as it came", resp.StatusCode, b)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(served) != 4 {
		t.Fatalf("the live edge served %v, want each request once", served)
	}
	if got := front.retries(); got["connection refused"] == 0 || got["edge draining"] == 0 {
		t.Fatalf("retries %v, want both reasons", got)
	}
}

func writeJSONStatus(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	io.WriteString(w, body)
}
