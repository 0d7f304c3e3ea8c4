package metrics

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/relaydev/relay/relay/fleet/breaker"
	"github.com/relaydev/relay/relay/wire"
)

// value is the value of the samples of family name whose labels include
// the given name/value pairs: a counter's or gauge's value, a histogram's
// count; 0 when the family has no sample (a vector without children).
func value(t *testing.T, g prometheus.Gatherer, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		total := 0.0
		for _, m := range mf.GetMetric() {
			if !hasLabels(m, labels) {
				continue
			}
			switch {
			case m.Counter != nil:
				total += m.Counter.GetValue()
			case m.Gauge != nil:
				total += m.Gauge.GetValue()
			case m.Histogram != nil:
				total += float64(m.Histogram.GetSampleCount())
			}
		}
		return total
	}
	return 0
}

func hasLabels(m *dto.Metric, pairs []string) bool {
	for i := 0; i+1 < len(pairs); i += 2 {
		found := false
		for _, l := range m.GetLabel() {
			if l.GetName() == pairs[i] && l.GetValue() == pairs[i+1] {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// moves checks that event changes the sample by want.
func moves(t *testing.T, g prometheus.Gatherer, name string, labels []string, want float64, event func()) {
	t.Helper()
	before := value(t, g, name, labels...)
	event()
	if got := value(t, g, name, labels...) - before; got != want {
		t.Errorf("%s%v moved by %v, want %v", name, labels, got, want)
	}
}

type fakeEdge struct {
	streams       int
	clients       map[Transport]int
	gaps, dropped uint64
	catchUps      map[CatchUp]uint64
}

func (f *fakeEdge) ActiveStreams() int            { return f.streams }
func (f *fakeEdge) ActiveClients(t Transport) int { return f.clients[t] }
func (f *fakeEdge) SequenceGaps() uint64          { return f.gaps }
func (f *fakeEdge) CatchUps(why CatchUp) uint64   { return f.catchUps[why] }
func (f *fakeEdge) LiveDropped() uint64           { return f.dropped }

func newEdge(t *testing.T) (*Edge, *fakeEdge, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	state := &fakeEdge{clients: map[Transport]int{}, catchUps: map[CatchUp]uint64{}}
	m, err := NewEdge(reg, state)
	if err != nil {
		t.Fatal(err)
	}
	return m, state, reg
}

func newWorker(t *testing.T) (*Worker, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := NewWorker(reg, NewNames([]string{"mock"}, []string{"mock-1"}, []string{"acme"}))
	if err != nil {
		t.Fatal(err)
	}
	return m, reg
}

func TestEdgeRequests(t *testing.T) {
	m, _, reg := newEdge(t)
	moves(t, reg, "relay_edge_requests_total", []string{"route", "/v1/chat/completions", "outcome", "ok"}, 1, func() {
		m.Request("/v1/chat/completions", OutcomeOf(200))
	})
	moves(t, reg, "relay_edge_requests_total", []string{"route", "none", "outcome", "not_found"}, 1, func() {
		m.Request("", OutcomeOf(404))
	})
	for status, want := range map[int]Outcome{101: OutcomeOK, 400: OutcomeInvalid, 410: OutcomeNotFound, 429: OutcomeRejected, 503: OutcomeUnavailable, 502: OutcomeError} {
		if got := OutcomeOf(status); got != want {
			t.Errorf("OutcomeOf(%d) = %s, want %s", status, got, want)
		}
	}
}

func TestEdgeActiveStreams(t *testing.T) {
	_, state, reg := newEdge(t)
	moves(t, reg, "relay_edge_active_streams", nil, 3, func() { state.streams = 3 })
}

func TestEdgeActiveClients(t *testing.T) {
	_, state, reg := newEdge(t)
	moves(t, reg, "relay_edge_active_clients", []string{"transport", "ws"}, 2, func() { state.clients[TransportWebSocket] = 2 })
	if n := testutil.CollectAndCount(reg, "relay_edge_active_clients"); n != len(Transports) {
		t.Errorf("%d active_clients samples, want one per transport", n)
	}
}

func TestEdgeTTFT(t *testing.T) {
	m, _, reg := newEdge(t)
	moves(t, reg, "relay_edge_ttft_seconds", nil, 1, func() { m.TTFT(300*time.Millisecond, 0) })
}

func TestEdgeRelayAddedTTFT(t *testing.T) {
	m, _, reg := newEdge(t)
	moves(t, reg, "relay_edge_relay_added_ttft_seconds", nil, 0, func() { m.TTFT(300*time.Millisecond, 0) })
	moves(t, reg, "relay_edge_relay_added_ttft_seconds", nil, 1, func() { m.TTFT(300*time.Millisecond, 280*time.Millisecond) })
}

func TestEdgeInterChunk(t *testing.T) {
	m, _, reg := newEdge(t)
	moves(t, reg, "relay_edge_inter_chunk_seconds", nil, 1, func() { m.InterChunk(20 * time.Millisecond) })
}

func TestEdgeChunksDelivered(t *testing.T) {
	m, _, reg := newEdge(t)
	moves(t, reg, "relay_edge_chunks_delivered_total", []string{"transport", "sse"}, 5, func() { m.Delivered(TransportSSE, 5, false) })
}

func TestEdgeResumes(t *testing.T) {
	m, _, reg := newEdge(t)
	moves(t, reg, "relay_edge_resumes_total", []string{"outcome", "accepted"}, 1, func() { m.Resume(ResumeOutcomeOf(0)) })
	moves(t, reg, "relay_edge_resumes_total", []string{"outcome", "expired"}, 1, func() { m.Resume(ResumeOutcomeOf(410)) })
}

func TestEdgeResumedChunks(t *testing.T) {
	m, _, reg := newEdge(t)
	moves(t, reg, "relay_edge_resumed_chunks_total", nil, 0, func() { m.Delivered(TransportSSE, 4, false) })
	moves(t, reg, "relay_edge_resumed_chunks_total", nil, 4, func() { m.Delivered(TransportSSE, 4, true) })
}

func TestEdgeResumedTokens(t *testing.T) {
	m, _, reg := newEdge(t)
	moves(t, reg, "relay_edge_resumed_tokens_total", nil, 12, func() { m.ResumedTokens(12) })
}

func TestSequenceGaps(t *testing.T) {
	_, state, reg := newEdge(t)
	moves(t, reg, "relay_sequence_gaps_total", nil, 1, func() { state.gaps++ })
}

func TestEdgeCatchUps(t *testing.T) {
	_, state, reg := newEdge(t)
	moves(t, reg, "relay_edge_catch_ups_total", []string{"reason", "idle"}, 2, func() { state.catchUps[CatchUpIdle] += 2 })
}

func TestEdgeLiveDropped(t *testing.T) {
	_, state, reg := newEdge(t)
	moves(t, reg, "relay_edge_live_dropped_total", nil, 7, func() { state.dropped += 7 })
}

func TestStreams(t *testing.T) {
	m, reg := newWorker(t)
	moves(t, reg, "relay_streams_total", []string{"status", "done"}, 1, func() { m.JobFinished(JobOutcomeOf("done")) })
	moves(t, reg, "relay_streams_total", nil, 0, func() { m.JobFinished(JobHandedOver) })
}

func TestWorkerJobs(t *testing.T) {
	m, reg := newWorker(t)
	moves(t, reg, "relay_worker_jobs_total", []string{"outcome", "handed_over"}, 1, func() { m.JobFinished(JobHandedOver) })
	if got := JobOutcomeOf("something new"); got != JobAbandoned {
		t.Errorf("unknown job status maps to %s", got)
	}
}

func TestWorkerTTFT(t *testing.T) {
	m, reg := newWorker(t)
	moves(t, reg, "relay_worker_ttft_seconds", []string{"provider", "mock", "model", "mock-1"}, 1, func() { m.TTFT("mock", "mock-1", time.Second) })
}

func TestUpstreamTTFT(t *testing.T) {
	m, reg := newWorker(t)
	moves(t, reg, "relay_upstream_ttft_seconds", []string{"provider", "mock"}, 1, func() { m.UpstreamTTFT("mock", "mock-1", time.Second) })
}

func TestChunksPublished(t *testing.T) {
	m, reg := newWorker(t)
	moves(t, reg, "relay_chunks_published_total", []string{"provider", "mock", "model", "mock-1"}, 9, func() { m.ChunksPublished("mock", "mock-1", 9) })
}

func TestUpstreamAttempts(t *testing.T) {
	m, reg := newWorker(t)
	for _, seam := range []Seam{SeamFirst, SeamRetry, SeamContinuation, SeamFallback, SeamTakeover} {
		moves(t, reg, "relay_upstream_attempts_total", []string{"seam", string(seam)}, 1, func() { m.Attempt("mock", "mock-1", seam) })
	}
}

func TestWorkerFenced(t *testing.T) {
	m, reg := newWorker(t)
	moves(t, reg, "relay_worker_fenced_total", nil, 1, func() { m.JobFinished(JobFenced) })
}

func TestAppendBatch(t *testing.T) {
	m, reg := newWorker(t)
	moves(t, reg, "relay_worker_append_batch_frames", nil, 1, func() { m.AppendBatch(12) })
}

func TestOffers(t *testing.T) {
	m, reg := newWorker(t)
	moves(t, reg, "relay_worker_offers_total", []string{"result", "taken"}, 1, func() { m.Offer(true) })
	moves(t, reg, "relay_worker_offers_total", []string{"result", "declined"}, 1, func() { m.Offer(false) })
}

func TestQuotaWait(t *testing.T) {
	m, reg := newWorker(t)
	moves(t, reg, "relay_quota_wait_seconds", []string{"provider", "mock"}, 0, func() { m.Admitted("mock", time.Millisecond, false) })
	moves(t, reg, "relay_quota_wait_seconds", []string{"provider", "mock"}, 1, func() { m.Admitted("mock", time.Second, false) })
}

func TestGateRefusals(t *testing.T) {
	m, reg := newWorker(t)
	moves(t, reg, "relay_gate_refusals_total", []string{"provider", "mock"}, 1, func() { m.Admitted("mock", 0, true) })
}

func TestTokens(t *testing.T) {
	m, reg := newWorker(t)
	moves(t, reg, "relay_tokens_total", []string{"direction", "in", "tenant", "default"}, 10, func() { m.Usage("mock", "mock-1", "", 10, 20, 0.5) })
	moves(t, reg, "relay_tokens_total", []string{"direction", "out", "tenant", "acme"}, 20, func() { m.Usage("mock", "mock-1", "acme", 10, 20, 0.5) })
}

func TestCost(t *testing.T) {
	m, reg := newWorker(t)
	moves(t, reg, "relay_cost_usd_total", []string{"provider", "mock", "model", "mock-1", "tenant", "default"}, 0.5, func() { m.Usage("mock", "mock-1", "", 10, 20, 0.5) })
}

// TestLabelsBounded: values outside the configuration never become label
// values.
func TestLabelsBounded(t *testing.T) {
	m, reg := newWorker(t)
	m.Usage("someone-else", "gpt-typed-by-a-client", "tenant-from-a-header", 1, 1, 1)
	if v := value(t, reg, "relay_cost_usd_total", "provider", "other", "model", "other", "tenant", "other"); v != 1 {
		t.Errorf("unknown names not counted as other: %v", v)
	}
}

func TestBreakerState(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewBreaker(reg, NewNames([]string{"mock"}, nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	m.Set("mock", "", BreakerClosed, time.Time{})
	moves(t, reg, "relay_breaker_state", []string{"provider", "mock", "model", "all", "state", "open"}, 1, func() {
		m.Set("mock", "", BreakerOpen, time.Now().Add(time.Second))
	})
	if v := value(t, reg, "relay_breaker_next_probe_timestamp_seconds", "provider", "mock"); v < float64(time.Now().Unix()) {
		t.Errorf("next probe at %v", v)
	}
}

func TestBreakerTransitions(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewBreaker(reg, NewNames([]string{"mock"}, []string{"mock-1"}, nil))
	if err != nil {
		t.Fatal(err)
	}
	moves(t, reg, "relay_breaker_transitions_total", []string{"from", "closed", "to", "open"}, 1, func() {
		m.Transition("mock", "", BreakerClosed, BreakerOpen, time.Now().Add(5*time.Second))
	})
	if v := value(t, reg, "relay_breaker_state", "provider", "mock", "state", "open"); v != 1 {
		t.Errorf("state after transition: %v", v)
	}
	// As the breaker's event handler, for a per-model breaker.
	var h breaker.EventHandler = m
	moves(t, reg, "relay_breaker_transitions_total", []string{"model", "mock-1", "from", "open", "to", "half_open"}, 1, func() {
		h.OnEvent(breaker.Event{At: time.Now(), Key: wire.ScopeKey("mock", "mock-1"), From: breaker.Open, To: breaker.HalfOpen})
	})
}

// TestSharedRegistry: roles in one process share a registry; families
// registered twice are reused, not an error.
func TestSharedRegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	a, err := NewWorker(reg, NewNames([]string{"mock"}, []string{"mock-1"}, nil))
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewWorker(reg, NewNames([]string{"mock"}, []string{"mock-1"}, nil))
	if err != nil {
		t.Fatal(err)
	}
	a.JobFinished(JobDone)
	b.JobFinished(JobDone)
	if v := value(t, reg, "relay_streams_total", "status", "done"); v != 2 {
		t.Errorf("shared family counted %v, want 2", v)
	}
	if _, err := NewBreaker(reg, Names{}); err != nil {
		t.Fatal(err)
	}
	if _, err := NewBreaker(reg, Names{}); err != nil {
		t.Fatal(err)
	}
}

// TestLint: names, help and units follow Prometheus conventions.
func TestLint(t *testing.T) {
	reg := prometheus.NewRegistry()
	if _, err := NewEdge(reg, &fakeEdge{}); err != nil {
		t.Fatal(err)
	}
	w, err := NewWorker(reg, NewNames([]string{"mock"}, []string{"mock-1"}, nil))
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewBreaker(reg, NewNames([]string{"mock"}, nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	// Vectors appear once they have a child.
	w.JobFinished(JobDone)
	w.Usage("mock", "mock-1", "", 1, 1, 1)
	b.Transition("mock", "", BreakerClosed, BreakerOpen, time.Now())
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
}

func TestAPIKeys(t *testing.T) {
	m, reg := newWorker(t)
	moves(t, reg, "relay_api_key_checks_total", []string{"provider", "mock", "result", "failed"}, 1, func() { m.KeyChecked("mock", "failed") })
	m.Keys("mock", map[string]int{"verified": 2, "failed": 1})
	m.Keys("mock", map[string]int{"verified": 1})
	for state, want := range map[string]float64{"verified": 1, "failed": 0, "pending": 0} {
		if got := value(t, reg, "relay_api_keys", "provider", "mock", "state", state); got != want {
			t.Errorf("relay_api_keys{state=%q} = %v, want %v", state, got, want)
		}
	}
}
