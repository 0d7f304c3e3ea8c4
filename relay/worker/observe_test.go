package worker

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/relaydev/relay/relay/fleet"
	"github.com/relaydev/relay/relay/mockupstream"
	"github.com/relaydev/relay/relay/provider"
	"github.com/relaydev/relay/relay/streams"
	"github.com/relaydev/relay/relay/wire"
)

// meteredWorker runs a worker whose metrics go to a registry the test
// reads, until the test ends.
func meteredWorker(t *testing.T, h *harness, gate Gate) *prometheus.Registry {
	t.Helper()
	reg := prometheus.NewRegistry()
	w, err := New(Config{ID: "metered"}, Deps{NC: h.nc, JS: h.js, Catalog: h.catalog, Logger: h.logger, Topology: h.topology, Gate: gate, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-ran; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return reg
}

// count is the value of one series of a family, 0 if it has none.
func count(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	total := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metric:
		for _, m := range mf.GetMetric() {
			for k, v := range labels {
				found := false
				for _, l := range m.GetLabel() {
					found = found || (l.GetName() == k && l.GetValue() == v)
				}
				if !found {
					continue metric
				}
			}
			switch {
			case m.Counter != nil:
				total += m.Counter.GetValue()
			case m.Histogram != nil:
				total += float64(m.Histogram.GetSampleCount())
			}
		}
	}
	return total
}

func TestMetricsTakeover(t *testing.T) {
	h := start(t, setup{mock: mockupstream.Config{Tokens: 8, TokenInterval: -1}, noWorker: true})
	id := wire.NewStreamID()
	// An earlier owner published the start of the answer and vanished.
	prefix := mockupstream.Answer(userMessages("taken over"), 8)[0]
	if err := h.appendFrames(id,
		wire.Frame{Kind: wire.KindClaim, Worker: "gone"},
		wire.Frame{Kind: wire.KindChunk, Role: "assistant", Content: prefix, Provider: "mock", Model: "mock-1", Attempt: 1},
	); err != nil {
		t.Fatal(err)
	}
	h.submit(id, "taken over")
	h.redeliver()
	reg := meteredWorker(t, h, nil)
	if status := h.waitJob(id); status != "done" {
		t.Fatalf("job %s", status)
	}
	if n := count(t, reg, "relay_upstream_attempts_total", map[string]string{"seam": "takeover", "provider": "mock"}); n != 1 {
		t.Fatalf("takeover attempts = %v, want 1", n)
	}
	// A takeover's first token is not the stream's: no worker TTFT.
	if n := count(t, reg, "relay_worker_ttft_seconds", nil); n != 0 {
		t.Fatalf("worker ttft observed %v times for a takeover", n)
	}
}

func TestMetricsFenced(t *testing.T) {
	h := start(t, setup{
		mock:     mockupstream.Config{Tokens: 500, TokenInterval: 10 * time.Millisecond},
		topology: streams.Topology{AckWait: time.Minute},
		noWorker: true,
	})
	reg := meteredWorker(t, h, nil)
	id := wire.NewStreamID()
	h.submit(id, "fenced")
	h.usurp(id)
	if status := h.waitJob(id); status != "fenced" {
		t.Fatalf("job %s, want fenced", status)
	}
	if n := count(t, reg, "relay_worker_fenced_total", nil); n != 1 {
		t.Fatalf("fenced = %v, want 1", n)
	}
	if n := count(t, reg, "relay_worker_jobs_total", map[string]string{"outcome": "fenced"}); n != 1 {
		t.Fatalf("jobs{fenced} = %v, want 1", n)
	}
	if n := count(t, reg, "relay_streams_total", nil); n != 0 {
		t.Fatalf("a fenced job counted %v streams: it wrote no end frame", n)
	}
}

// waitingGate makes every admission of one provider wait, and refuses
// another's.
type waitingGate struct {
	wait   map[string]time.Duration
	refuse map[string]bool
}

func (g *waitingGate) Admit(ctx context.Context, p, _ string) (fleet.Ticket, error) {
	if g.refuse[p] {
		return nil, fleet.ErrProviderUnavailable
	}
	select {
	case <-time.After(g.wait[p]):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return fleet.NoTicket{}, nil
}

func TestMetricsGateWaitsAndRefusals(t *testing.T) {
	h := start(t, setup{
		mock:     mockupstream.Config{Tokens: 5, TokenInterval: -1},
		noWorker: true,
		providers: func(mockURL string) []provider.Config {
			return []provider.Config{
				{Name: "down", BaseURL: mockURL, Models: []string{"mock-1"}, BackupProviders: []string{"mock"}, Retry: fastRetry},
				{Name: "mock", BaseURL: mockURL, Models: []string{"mock-1"}, Retry: fastRetry},
			}
		},
	})
	reg := meteredWorker(t, h, &waitingGate{wait: map[string]time.Duration{"mock": 50 * time.Millisecond}, refuse: map[string]bool{"down": true}})
	id := wire.NewStreamID()
	h.submit(id, "gated")
	if status := h.waitJob(id); status != "done" {
		t.Fatalf("job %s", status)
	}
	if n := count(t, reg, "relay_gate_refusals_total", map[string]string{"provider": "down"}); n != 1 {
		t.Errorf("refusals{down} = %v, want 1", n)
	}
	if n := count(t, reg, "relay_quota_wait_seconds", map[string]string{"provider": "mock"}); n != 1 {
		t.Errorf("quota waits{mock} = %v, want 1", n)
	}
	if n := count(t, reg, "relay_upstream_attempts_total", map[string]string{"provider": "mock", "seam": "fallback"}); n != 1 {
		t.Errorf("attempts{mock, fallback} = %v, want 1", n)
	}
}

// TestJobFinishedLine: the worker's one line per stream names the tenant,
// every provider and model called, the tokens, cost, attempts and
// duration.
func TestJobFinishedLine(t *testing.T) {
	h := start(t, setup{
		mock:     mockupstream.Config{Tokens: 6, TokenInterval: -1},
		noWorker: true,
		models:   []provider.Model{{Name: "mock-1", Price: provider.Price{InputPerMTok: 1, OutputPerMTok: 2}}},
	})
	meteredWorker(t, h, nil)
	id := wire.NewStreamID()
	h.submit(id, "[[mock: cut_after=2, times=1]] logged")
	h.waitJob(id)
	line, _ := h.logs.find(func(l map[string]string) bool { return l["msg"] == "job finished" && l["stream"] == id })
	for _, key := range []string{"status", "tenant", "providers", "models", "prompt_tokens", "completion_tokens", "cost", "attempts", "duration"} {
		if _, ok := line[key]; !ok {
			t.Errorf("job finished line lacks %s: %v", key, line)
		}
	}
	if line["providers"] != "[mock]" || line["models"] != "[mock-1]" || line["attempts"] != "2" || line["completion_tokens"] == "0" {
		t.Errorf("job finished line: %v", line)
	}
}
