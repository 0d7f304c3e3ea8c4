package e2e

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/relaydev/relay/relay/mockupstream"
	"github.com/relaydev/relay/relay/relaytest"
	"github.com/relaydev/relay/relay/wire"
)

// TestMetricsMoveEndToEnd drives the events behind each family through a
// running relay and reads them back from the roles' /metrics: the edge's
// and the worker's move when their events happen, with bounded labels.
// (Takeovers, fenced writes and gate waits are driven in
// relay/observe_test.go.)
func TestMetricsMoveEndToEnd(t *testing.T) {
	sys := start(t, options{Coordinator: true, Mock: mockupstream.Config{Tokens: 12, TokenInterval: 5 * time.Millisecond}, Tune: withOpsModels(nil)})

	// A plain answer; a retry (503 before any text); continuations then a
	// fallback (mock-1 cut twice, one retry of its own, then mock-2); a
	// failed stream (the provider refuses the request).
	ask(t, sys.Edge, "mock-1", "metrics: plain")
	if a := ask(t, sys.Edge, "mock-1", "[[mock: status=503, times=1]] metrics: retry"); a.status != "done" {
		t.Fatalf("retry: status %s", a.status)
	}
	if a := ask(t, sys.Edge, "mock-1", "[[mock: cut_after=2, times=2]] metrics: fallback"); a.status != "done" || !strings.Contains(strings.Join(a.seams(), " "), "fallback:mock/mock-2") {
		t.Fatalf("fallback: status %s, seams %v", a.status, a.seams())
	}
	// A refusal before any token is the provider's HTTP status, also
	// streamed; the stream itself ended failed.
	refused, _ := prompt("[[mock: status=400]] metrics: failed", 12)
	res, err := httpClient.Post(sys.Edge+"/v1/chat/completions", "application/json", bytes.NewReader(chatBody(t, refused, true)))
	must(t, err)
	res.Body.Close()
	if res.StatusCode != http.StatusBadRequest {
		t.Fatalf("refused: HTTP %d, want 400", res.StatusCode)
	}

	// A client that leaves after three events, while the answer stalls,
	// then resumes after its cursor and reads to the end.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	msgs, want := prompt("[[mock: stall_after=4, stall_for=1500ms]] metrics: resume", 12)
	s, err := openSSE(ctx, http.MethodPost, sys.Edge+"/v1/chat/completions", chatBody(t, msgs, true), "")
	must(t, err)
	id := s.resp.Header.Get("X-Relay-Stream-Id")
	var tr transcript
	must(t, tr.readUntil(s, 3))
	during := scrape(t, sys.Edge)
	s.Close()
	r, err := openSSE(ctx, http.MethodGet, sys.Edge+"/v1/streams/"+id, nil, tr.lastID)
	must(t, err)
	must(t, tr.readUntil(r, 0))
	r.Close()
	if tr.text.String() != want {
		t.Fatalf("resumed text %q, want %q", tr.text.String(), want)
	}
	// Resumes refused: a malformed cursor, an unknown stream.
	if st, _ := get(t, sys.Edge+"/v1/streams/"+id+"?last_event_id=nonsense"); st != http.StatusBadRequest {
		t.Fatalf("bad cursor: %d", st)
	}
	if st, _ := get(t, sys.Edge+"/v1/streams/"+wire.NewStreamID()+"?last_event_id=1-1"); st != http.StatusNotFound {
		t.Fatalf("unknown stream: %d", st)
	}

	for _, c := range []check{
		{"relay_edge_active_streams", nil, 1},
		{"relay_edge_active_clients", []string{"transport", "sse"}, 1},
	} {
		c.atLeast(t, "edge (stream open)", during)
	}
	// The edge accounts for a session (its resumed tokens, the open
	// streams) when it closes it, which may come just after the client
	// read the end.
	var edge map[string]*dtoFamily
	relaytest.Eventually(t, 10*time.Second, 10*time.Millisecond, func() bool {
		edge = scrape(t, sys.Edge)
		resumed, _ := sample(edge, "relay_edge_resumed_tokens_total")
		open, _ := sample(edge, "relay_edge_active_streams")
		return resumed >= 1 && open == 0
	})
	for _, c := range []check{
		{"relay_edge_requests_total", []string{"route", "/v1/chat/completions", "outcome", "ok"}, 4},
		{"relay_edge_requests_total", []string{"route", "/v1/chat/completions", "outcome", "invalid"}, 1},
		{"relay_edge_requests_total", []string{"route", "/v1/streams/{id}", "outcome", "invalid"}, 1},
		{"relay_edge_requests_total", []string{"route", "/v1/streams/{id}", "outcome", "not_found"}, 1},
		{"relay_edge_chunks_delivered_total", []string{"transport", "sse"}, 12},
		{"relay_edge_ttft_seconds", nil, 4},
		{"relay_edge_relay_added_ttft_seconds", nil, 4},
		{"relay_edge_inter_chunk_seconds", nil, 1},
		{"relay_edge_resumes_total", []string{"outcome", "accepted"}, 1},
		{"relay_edge_resumes_total", []string{"outcome", "invalid"}, 1},
		{"relay_edge_resumes_total", []string{"outcome", "not_found"}, 1},
		{"relay_edge_resumed_chunks_total", nil, 1},
		{"relay_edge_resumed_tokens_total", nil, 1},
		{"relay_sequence_gaps_total", nil, 0},
		{"relay_edge_catch_ups_total", nil, 0},
		{"relay_edge_live_dropped_total", nil, 0},
		{"relay_edge_active_streams", nil, 0},
	} {
		c.atLeast(t, "edge", edge)
	}
	if v, _ := sample(edge, "relay_sequence_gaps_total"); v != 0 {
		t.Errorf("relay_sequence_gaps_total = %v, want 0", v)
	}

	// The worker counts a job once its end frame is stored and acked,
	// just after the client saw the end.
	checks := []check{
		{"relay_streams_total", []string{"status", "done"}, 4},
		{"relay_streams_total", []string{"status", "failed"}, 1},
		{"relay_worker_jobs_total", []string{"outcome", "done"}, 4},
		{"relay_worker_ttft_seconds", []string{"provider", "mock", "model", "mock-1"}, 4},
		{"relay_upstream_ttft_seconds", []string{"provider", "mock"}, 5},
		{"relay_chunks_published_total", []string{"provider", "mock", "model", "mock-1"}, 4},
		{"relay_chunks_published_total", []string{"provider", "mock", "model", "mock-2"}, 1},
		{"relay_upstream_attempts_total", []string{"seam", "first"}, 5},
		{"relay_upstream_attempts_total", []string{"seam", "retry"}, 1},
		{"relay_upstream_attempts_total", []string{"seam", "continuation"}, 1},
		{"relay_upstream_attempts_total", []string{"seam", "fallback", "model", "mock-2"}, 1},
		{"relay_upstream_attempts_total", []string{"seam", "takeover"}, 0},
		{"relay_worker_fenced_total", nil, 0},
		{"relay_quota_wait_seconds", []string{"provider", "mock"}, 0},
		{"relay_gate_refusals_total", []string{"provider", "mock"}, 0},
		{"relay_tokens_total", []string{"direction", "in", "tenant", "default", "model", "mock-1"}, 1},
		{"relay_tokens_total", []string{"direction", "out", "tenant", "default", "model", "mock-2"}, 1},
		{"relay_cost_usd_total", []string{"provider", "mock", "model", "mock-1", "tenant", "default"}, 1e-6},
	}
	var worker map[string]*dtoFamily
	relaytest.Eventually(t, 10*time.Second, 50*time.Millisecond, func() bool {
		worker = scrape(t, sys.Worker)
		for _, c := range checks {
			if v, ok := sample(worker, c.name, c.labels...); !ok || v < c.min {
				return false
			}
		}
		return true
	})
	for _, c := range checks {
		c.atLeast(t, "worker", worker)
	}
	// The worker counts the transition of the breaker a failing request
	// opens.
	holdOpenBreaker(t, sys, "metrics: breaker")
	breaker := []check{
		{"relay_breaker_transitions_total", []string{"provider", "mock", "from", "closed", "to", "open"}, 1},
		{"relay_breaker_state", []string{"provider", "mock", "state", "open"}, 1},
		{"relay_breaker_next_probe_timestamp_seconds", []string{"provider", "mock"}, 1},
	}
	relaytest.Eventually(t, 10*time.Second, 50*time.Millisecond, func() bool {
		worker = scrape(t, sys.Worker)
		for _, c := range breaker {
			if v, ok := sample(worker, c.name, c.labels...); !ok || v < c.min {
				return false
			}
		}
		return true
	})
	// The coordinator serves its process's metrics too.
	if _, ok := sample(scrape(t, sys.Coordinator), "go_goroutines"); !ok {
		t.Error("coordinator /metrics lacks go_goroutines")
	}
	// No label value is a stream id.
	for _, mfs := range []map[string]*dtoFamily{edge, worker} {
		for name, mf := range mfs {
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if strings.Contains(l.GetValue(), id) {
						t.Errorf("%s has the stream id in label %s", name, l.GetName())
					}
				}
			}
		}
	}
}

// check is a family's sample that must be exported and at least min.
type check struct {
	name   string
	labels []string
	min    float64
}

func (c check) atLeast(t *testing.T, role string, mfs map[string]*dtoFamily) {
	t.Helper()
	v, ok := sample(mfs, c.name, c.labels...)
	switch {
	case !ok:
		t.Errorf("%s: %s not exported", role, c.name)
	case v < c.min:
		t.Errorf("%s: %s%v = %v, want at least %v", role, c.name, c.labels, v, c.min)
	}
}
