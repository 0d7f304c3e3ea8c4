package procs

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestSystemOfProcesses starts a small relay of separate processes, streams
// one answer, kills and restarts the worker, and checks that Close leaves
// no process behind.
func TestSystemOfProcesses(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	h, err := New(ctx, Options{Dir: t.TempDir(), Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()

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

	stream := func() string {
		t.Helper()
		body := `{"model":"mock-1","stream":true,"messages":[{"role":"user","content":"hi"}]}`
		req, _ := http.NewRequestWithContext(ctx, "POST", e.URL+"/v1/chat/completions", strings.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	if got := stream(); !strings.HasSuffix(got, "data: [DONE]\n\n") {
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
	if got := stream(); !strings.HasSuffix(got, "data: [DONE]\n\n") {
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
