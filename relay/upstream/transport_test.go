package upstream

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

func TestNewTransportKeepsIdleConnectionsPerHost(t *testing.T) {
	for _, tc := range []struct{ asked, want int }{{64, 64}, {1, 2}, {0, 2}} {
		tr := NewTransport(tc.asked).std
		if tr.MaxIdleConnsPerHost != tc.want || tr.MaxIdleConns != 0 {
			t.Errorf("NewTransport(%d): %d idle per host, %d in all; want %d per host, no cap in all",
				tc.asked, tr.MaxIdleConnsPerHost, tr.MaxIdleConns, tc.want)
		}
	}
}

// bothProtocols serves h over HTTP/1.1 and h2c on one loopback port, as
// the fake upstream does.
func bothProtocols(t *testing.T, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetHTTP1(true)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

func TestTransportSendsPriorKnowledgeTargetsOverH2C(t *testing.T) {
	srv := bothProtocols(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, r.Proto) })
	c := &http.Client{Transport: NewTransport(2)}
	defer c.CloseIdleConnections()
	for _, tc := range []struct {
		priorKnowledge bool
		want           string
	}{{false, "HTTP/1.1"}, {true, "HTTP/2.0"}} {
		req, err := Target{BaseURL: srv.URL, HTTP2PriorKnowledge: tc.priorKnowledge}.NewRequest(t.Context(), http.MethodGet, "/", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || string(b) != tc.want {
			t.Errorf("prior knowledge %v: served over %q (%v), want %s", tc.priorKnowledge, b, err, tc.want)
		}
	}
}

// Go's server runs at most 250 streams at once on one connection; the
// transport must dial another for the next ones rather than queue them,
// or a worker's calls past the 250th would wait for others to end. A
// burst of calls before the first connection is up dials more than that,
// but the transport keeps one connection while it has room and closes
// the others unused; until the server's settings arrive it allows 100
// streams on a connection, so the 260 take 2 or 3.
func TestTransportOpensAnotherH2CConnectionWhenOneIsFull(t *testing.T) {
	const calls = 260
	var arrived sync.WaitGroup
	arrived.Add(calls)
	release := make(chan struct{})
	var mu sync.Mutex
	conns := map[string]int{} // calls by client address
	srv := bothProtocols(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		conns[r.RemoteAddr]++
		mu.Unlock()
		arrived.Done()
		<-release
	})
	c := &http.Client{Transport: NewTransport(2)}
	defer c.CloseIdleConnections()
	target := Target{BaseURL: srv.URL, HTTP2PriorKnowledge: true}
	var done sync.WaitGroup
	errs := make(chan error, calls)
	for range calls {
		done.Go(func() {
			req, err := target.NewRequest(t.Context(), http.MethodGet, "/", nil)
			if err != nil {
				errs <- err
				return
			}
			resp, err := c.Do(req)
			if err != nil {
				errs <- err
				return
			}
			resp.Body.Close()
			if resp.ProtoMajor != 2 {
				errs <- errors.New("answered over " + resp.Proto)
			}
		})
	}
	all := make(chan struct{})
	go func() { arrived.Wait(); close(all) }()
	select {
	case <-all:
	case <-time.After(20 * time.Second):
		t.Fatalf("only some of %d calls reached the server at once", calls)
	}
	mu.Lock()
	n := len(conns)
	mu.Unlock()
	close(release)
	done.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n < 2 || n > 3 {
		t.Errorf("%d calls at once took %d connections, want 2 or 3: %v", calls, n, conns)
	}
}

// A provider that aborts an answer mid-stream resets the h2c stream
// (RST_STREAM) where over HTTP/1.1 it would close the connection: the
// answer must still read as cut, a Transient failure, never as finished.
func TestAbortedH2CStreamIsTransient(t *testing.T) {
	srv := bothProtocols(t, helloOverH2C(func(http.ResponseWriter, *http.Request) { panic(http.ErrAbortHandler) }))
	c := &Client{HTTPClient: &http.Client{Transport: NewTransport(2)}}
	defer c.CloseIdleConnections()
	s, err := c.Stream(t.Context(), Target{Provider: "test", BaseURL: srv.URL, HTTP2PriorKnowledge: true}, []byte(`{}`))
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	defer s.Close()
	content, err := readAll(s)
	if content != "Hello" || errors.Is(err, io.EOF) || Classify(err) != Transient {
		t.Fatalf("read %q, then %v (%v); want Hello, then a transient error", content, err, Classify(err))
	}
}

// A provider that stalls an h2c stream is left after StallTimeout as over
// HTTP/1.1, and the reset stream ends its handler, where HTTP/1.1 would
// close the connection.
func TestStalledH2CStreamIsLeft(t *testing.T) {
	gone := make(chan struct{})
	srv := bothProtocols(t, helloOverH2C(func(_ http.ResponseWriter, r *http.Request) {
		waitGone(t, r)
		close(gone)
	}))
	c := &Client{HTTPClient: &http.Client{Transport: NewTransport(2)}, StallTimeout: 100 * time.Millisecond}
	defer c.CloseIdleConnections()
	s, err := c.Stream(t.Context(), Target{Provider: "test", BaseURL: srv.URL, HTTP2PriorKnowledge: true}, []byte(`{}`))
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	content, err := readAll(s)
	s.Close()
	if content != "Hello" || !errors.Is(err, ErrStalled) || Classify(err) != Transient {
		t.Fatalf("read %q, then %v (%v); want Hello, then ErrStalled", content, err, Classify(err))
	}
	select {
	case <-gone:
	case <-time.After(10 * time.Second):
		t.Fatal("the provider's handler still runs after the stream was left")
	}
}

// overH2C reports whether r came over HTTP/2, and answers 505 if not.
func overH2C(w http.ResponseWriter, r *http.Request) bool {
	if r.ProtoMajor != 2 {
		http.Error(w, "not over h2c: "+r.Proto, http.StatusHTTPVersionNotSupported)
		return false
	}
	return true
}

// helloOverH2C is a provider's handler that refuses anything but h2c
// (overH2C), streams one chunk, "Hello", and then does then.
func helloOverH2C(then http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !overH2C(w, r) {
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: "+chunkData("Hello", "")+"\n\n")
		http.NewResponseController(w).Flush()
		then(w, r)
	}
}
