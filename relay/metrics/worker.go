package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Worker holds a worker's families. Its methods may be called
// concurrently; provider, model and tenant arguments are bounded by the
// Names it was made with.
type Worker struct {
	names           Names
	streams         *prometheus.CounterVec
	jobs            *prometheus.CounterVec
	ttft            *prometheus.HistogramVec
	upstreamTTFT    *prometheus.HistogramVec
	chunksPublished *prometheus.CounterVec
	attempts        *prometheus.CounterVec
	fenced          prometheus.Counter
	appendBatch     prometheus.Histogram
	offers          *prometheus.CounterVec
	quotaWait       *prometheus.HistogramVec
	refusals        *prometheus.CounterVec
	tokens          *prometheus.CounterVec
	cost            *prometheus.CounterVec
	keyChecks       *prometheus.CounterVec
	keys            *prometheus.GaugeVec
}

// NewWorker registers a worker's families with reg (nil: a private
// registry).
func NewWorker(reg prometheus.Registerer, names Names) (*Worker, error) {
	r := newRegistrar(reg)
	m := &Worker{
		names: names,
		streams: counterVec(r, "relay_streams_total",
			"Streams ended, by terminal status (done, incomplete, failed, cancelled), counted by the worker that wrote the end frame.",
			"status"),
		jobs: counterVec(r, "relay_worker_jobs_total",
			"Jobs finished, by outcome: a terminal status, or fenced, abandoned, handed_over, already_ended.",
			"outcome"),
		ttft: histogramVec(r, "relay_worker_ttft_seconds",
			"Time to first token at the worker, for streams it started: from taking the request off the queue to the first token from the provider.",
			ttftBuckets, "provider", "model"),
		upstreamTTFT: histogramVec(r, "relay_upstream_ttft_seconds",
			"The provider's own time to first token: from starting an upstream call to its first token.",
			ttftBuckets, "provider", "model"),
		chunksPublished: counterVec(r, "relay_chunks_published_total",
			"Chunk frames stored in JetStream.",
			"provider", "model"),
		attempts: counterVec(r, "relay_upstream_attempts_total",
			"Upstream calls, by why they were made: first, retry (nothing published yet), continuation (continues published text), fallback (another model or provider), takeover (continues another worker's stream).",
			"provider", "model", "seam"),
		fenced: counter(r, "relay_worker_fenced_total",
			"Jobs whose write to the chunk log was fenced: another worker had taken the stream over."),
		appendBatch: histogram(r, "relay_worker_append_batch_frames",
			"Frames per write of a worker's committer to a replicated chunk stream: one atomic batch of several streams' frames, or one frame alone. Claims and first chunks, always alone, are not counted.",
			batchBuckets),
		offers: counterVec(r, "relay_worker_offers_total",
			"Requests offered to the worker by an edge before they were queued, by result: taken (a slot was free and started it at once) or declined (none was; the request waits in the work queue).",
			"result"),
		quotaWait: histogramVec(r, "relay_quota_wait_seconds",
			"Waits at the gate before an upstream call (a shared Retry-After, a quota): admissions that took longer than 10ms.",
			waitBuckets, "provider"),
		refusals: counterVec(r, "relay_gate_refusals_total",
			"Upstream calls the gate refused (an open breaker); the request moved on along its route.",
			"provider"),
		tokens: counterVec(r, "relay_tokens_total",
			"Tokens the providers reported, by direction (in: prompt, out: completion).",
			"provider", "model", "tenant", "direction"),
		cost: counterVec(r, "relay_cost_usd_total",
			"Cost in USD of the tokens the providers reported, by the models' configured prices.",
			"provider", "model", "tenant"),
		keyChecks: counterVec(r, "relay_api_key_checks_total",
			"Checks of provider API keys before they take traffic, by result: verified, failed (refused by the provider), pending (the provider could not tell), unchecked (no model list to check with).",
			"provider", "result"),
		keys: gaugeVec(r, "relay_api_keys",
			"The worker's provider API keys, by the state of their check (verified, failed, pending, unchecked).",
			"provider", "state"),
	}
	if r.err != nil {
		return nil, r.err
	}
	// Enumerable series exist from the start, so rate() sees their first
	// event.
	for _, o := range jobOutcomes {
		m.jobs.WithLabelValues(string(o))
		if s, ok := streamStatus(o); ok {
			m.streams.WithLabelValues(string(s))
		}
	}
	for p := range names.providers {
		for _, st := range keyStates {
			m.keyChecks.WithLabelValues(p, st)
			m.keys.WithLabelValues(p, st)
		}
		m.quotaWait.WithLabelValues(p)
		m.refusals.WithLabelValues(p)
		for model := range names.models {
			for _, seam := range seams {
				m.attempts.WithLabelValues(p, model, string(seam))
			}
		}
	}
	return m, nil
}

// JobFinished counts a job's end, and the stream's when the job wrote its
// end frame.
func (m *Worker) JobFinished(o JobOutcome) {
	m.jobs.WithLabelValues(string(o)).Inc()
	if s, ok := streamStatus(o); ok {
		m.streams.WithLabelValues(string(s)).Inc()
	}
	if o == JobFenced {
		m.fenced.Inc()
	}
}

// Offer records an offer the worker took or declined.
func (m *Worker) Offer(taken bool) {
	result := "declined"
	if taken {
		result = "taken"
	}
	m.offers.WithLabelValues(result).Inc()
}

// AppendBatch records a committer's write of frames frames.
func (m *Worker) AppendBatch(frames int) { m.appendBatch.Observe(float64(frames)) }

// TTFT records the worker's time to first token of a stream it started.
func (m *Worker) TTFT(provider, model string, d time.Duration) {
	m.ttft.WithLabelValues(m.names.Provider(provider), m.names.Model(model)).Observe(d.Seconds())
}

// UpstreamTTFT records an upstream call's time to first token.
func (m *Worker) UpstreamTTFT(provider, model string, d time.Duration) {
	m.upstreamTTFT.WithLabelValues(m.names.Provider(provider), m.names.Model(model)).Observe(d.Seconds())
}

// ChunksPublished counts n stored chunk frames.
func (m *Worker) ChunksPublished(provider, model string, n int) {
	if n > 0 {
		m.chunksPublished.WithLabelValues(m.names.Provider(provider), m.names.Model(model)).Add(float64(n))
	}
}

// Attempt counts an upstream call.
func (m *Worker) Attempt(provider, model string, seam Seam) {
	m.attempts.WithLabelValues(m.names.Provider(provider), m.names.Model(model), string(seam)).Inc()
}

// minQuotaWait is the shortest admission counted as a wait: a gate that
// reads its state from KV takes a round trip without waiting.
const minQuotaWait = 10 * time.Millisecond

// Admitted records how long the gate took to admit or refuse a call, and
// whether it refused.
func (m *Worker) Admitted(provider string, took time.Duration, refused bool) {
	p := m.names.Provider(provider)
	if took >= minQuotaWait {
		m.quotaWait.WithLabelValues(p).Observe(took.Seconds())
	}
	if refused {
		m.refusals.WithLabelValues(p).Inc()
	}
}

// Usage counts tokens and their cost.
func (m *Worker) Usage(provider, model, tenant string, in, out int, cost float64) {
	p, mo, t := m.names.Provider(provider), m.names.Model(model), m.names.Tenant(tenant)
	if in > 0 {
		m.tokens.WithLabelValues(p, mo, t, string(DirectionIn)).Add(float64(in))
	}
	if out > 0 {
		m.tokens.WithLabelValues(p, mo, t, string(DirectionOut)).Add(float64(out))
	}
	if cost > 0 {
		m.cost.WithLabelValues(p, mo, t).Add(cost)
	}
}

// keyStates are the states of a key's check (package apikeys).
var keyStates = []string{"verified", "failed", "pending", "unchecked"}

// KeyChecked counts a check of one of provider's API keys.
func (m *Worker) KeyChecked(provider, result string) {
	m.keyChecks.WithLabelValues(m.names.Provider(provider), result).Inc()
}

// Keys sets how many of provider's API keys are in each state; a state
// not in byState has none.
func (m *Worker) Keys(provider string, byState map[string]int) {
	p := m.names.Provider(provider)
	for _, st := range keyStates {
		m.keys.WithLabelValues(p, st).Set(float64(byState[st]))
	}
}
