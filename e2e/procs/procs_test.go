package procs

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/relay/wire"
)

// TestSystemOfProcesses starts a small relay of separate processes, streams
// one answer, kills and restarts the worker, and checks that Close leaves
// no process behind.
func TestSystemOfProcesses(t *testing.T) {
	ctx, h := newHarness(t)
	n, err := h.StartNATS(ctx, NATSOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mock, err := h.Start(ctx, Role{Role: MockUpstream, Settings: Settings{
		"mock_upstream.tokens": 5, "mock_upstream.token_interval": "-1ns",
	}})
	if err != nil {
		t.Fatal(err)
	}
	providers := []Provider{mock.Provider("mock", "mock-1", "mock-2")}
	w, err := h.Start(ctx, Role{Role: Worker, NATS: n.URLs(), Providers: providers,
		Settings: Settings{"worker.max_inflight": 4}})
	if err != nil {
		t.Fatal(err)
	}
	e, err := h.Start(ctx, Role{Role: Edge, NATS: n.URLs(), Providers: providers})
	if err != nil {
		t.Fatal(err)
	}
	if w.Name != "worker-1" || e.Addr == "" || !strings.HasSuffix(mock.URL, "/v1") {
		t.Fatalf("worker %q, edge addr %q, mock URL %q", w.Name, e.Addr, mock.URL)
	}
	if rss, err := e.RSS(); err != nil || rss < 1<<20 {
		t.Fatalf("edge RSS %d, %v", rss, err)
	}

	if got := streamAnswer(t, ctx, e.URL, "mock-1"); !strings.HasSuffix(got, "data: [DONE]\n\n") {
		t.Fatalf("stream:\n%s", got)
	}

	if err := w.Kill(); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Restart(ctx, e); err == nil {
		t.Fatal("restarted a running process")
	}
	w2, err := h.Restart(ctx, w)
	if err != nil {
		t.Fatal(err)
	}
	if w2.LogPath == w.LogPath {
		t.Fatalf("restart reuses log %s", w.LogPath)
	}
	if got := streamAnswer(t, ctx, e.URL, "mock-1"); !strings.HasSuffix(got, "data: [DONE]\n\n") {
		t.Fatalf("stream after restart:\n%s", got)
	}

	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	for _, p := range h.Processes() {
		select {
		case <-p.Exited():
		default:
			t.Errorf("%s still running after Close", p.Name)
		}
	}
}

// TestDevProcess starts `relay dev` as one process serving an external fake
// upstream, streams one answer through it, and finds the answer's chunks
// in the server it embeds.
func TestDevProcess(t *testing.T) {
	ctx, h := newHarness(t)
	mock, err := h.Start(ctx, Role{Role: MockUpstream, Settings: Settings{
		"mock_upstream.tokens": 5, "mock_upstream.token_interval": "-1ns", "mock_upstream.models": []string{"ext-1"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	d, err := h.Start(ctx, Role{Role: Dev, Providers: []Provider{mock.Provider("ext", "ext-1")},
		Settings: Settings{"edge.demo": false}})
	if err != nil {
		t.Fatal(err)
	}
	if got := streamAnswer(t, ctx, d.URL, "ext-1"); !strings.HasSuffix(got, "data: [DONE]\n\n") {
		t.Fatalf("stream:\n%s", got)
	}
	nc, err := nats.Connect(d.NATS)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	chunks, err := js.Stream(ctx, wire.ChunkStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := chunks.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The claim, at least one chunk, and the end.
	if info.State.Msgs < 3 {
		t.Fatalf("%d frames stored in the embedded server, want the answer's", info.State.Msgs)
	}
}

// streamAnswer streams one answer of model from an edge and returns the
// response body.
func streamAnswer(t *testing.T, ctx context.Context, edgeURL, model string) string {
	t.Helper()
	body := `{"model":"` + model + `","stream":true,"messages":[{"role":"user","content":"hi"}]}`
	req, _ := http.NewRequestWithContext(ctx, "POST", edgeURL+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// newHarness returns a harness that the test's end closes, and a context
// bounding the test.
func newHarness(t *testing.T) (context.Context, *Harness) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	h, err := New(ctx, Options{Dir: t.TempDir(), Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return ctx, h
}
