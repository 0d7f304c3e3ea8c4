package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// EdgeState is what an edge's gauges and counters read when scraped: the
// edge keeps these numbers for itself already.
type EdgeState interface {
	// ActiveStreams is the number of streams the edge follows.
	ActiveStreams() int
	// ActiveClients is the number of clients connected by t.
	ActiveClients(t Transport) int
	// SequenceGaps counts live frames that did not follow the last one,
	// each repaired from the log.
	SequenceGaps() uint64
	// CatchUps counts the other re-reads of the log.
	CatchUps(why CatchUp) uint64
	// LiveDropped counts live frames not queued for a slow client.
	LiveDropped() uint64
}

// Edge holds an edge's families. Its methods may be called concurrently.
type Edge struct {
	requests        *prometheus.CounterVec
	ttft            prometheus.Histogram
	relayAdded      prometheus.Histogram
	interChunk      prometheus.Histogram
	chunksDelivered *prometheus.CounterVec
	resumes         *prometheus.CounterVec
	resumedChunks   prometheus.Counter
	resumedTokens   prometheus.Counter
	spend           spendFamilies // spend.go
}

// NewEdge registers an edge's families with reg (nil: a private
// registry), the gauges and counters that read state among them.
func NewEdge(reg prometheus.Registerer, state EdgeState) (*Edge, error) {
	r := newRegistrar(reg)
	m := &Edge{
		spend: newSpendFamilies(r),
		requests: counterVec(r, "relay_edge_requests_total",
			"HTTP requests the edge answered, by route pattern and outcome (ok, invalid, not_found, rejected, unavailable, error).",
			"route", "outcome"),
		ttft: histogram(r, "relay_edge_ttft_seconds",
			"Time to first token as a new stream's client sees it: from the edge accepting the request to the first chunk written to the client.",
			ttftBuckets),
		relayAdded: histogram(r, "relay_edge_relay_added_ttft_seconds",
			"The part of relay_edge_ttft_seconds the relay adds: the edge's time to first token minus the upstream call's own time to first token, which the first chunk carries.",
			overheadBuckets),
		interChunk: histogram(r, "relay_edge_inter_chunk_seconds",
			"Time between two writes of chunks to the same client.",
			gapBuckets),
		chunksDelivered: counterVec(r, "relay_edge_chunks_delivered_total",
			"Chunks written to clients, by transport (sse, ws, completion).",
			"transport"),
		resumes: counterVec(r, "relay_edge_resumes_total",
			"Requests that resumed a stream after a cursor, by outcome (accepted, not_found, expired, invalid, unavailable).",
			"outcome"),
		resumedChunks: counter(r, "relay_edge_resumed_chunks_total",
			"Chunks delivered to clients that resumed: they reached the client only because it resumed."),
		resumedTokens: counter(r, "relay_edge_resumed_tokens_total",
			"Completion tokens that reached a client only because it resumed, estimated when a resumed session delivers the end frame: the stream's completion tokens times the share of its chunks that session delivered."),
	}
	for _, t := range Transports {
		m.chunksDelivered.WithLabelValues(string(t))
	}
	for _, o := range []ResumeOutcome{ResumeAccepted, ResumeNotFound, ResumeExpired, ResumeInvalid, ResumeUnavailable} {
		m.resumes.WithLabelValues(string(o))
	}
	if state != nil {
		register(r, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "relay_edge_active_streams",
			Help: "Streams this edge follows: one live subscription each, however many clients follow it.",
		}, func() float64 { return float64(state.ActiveStreams()) }))
		clients := &funcCollector{
			desc: prometheus.NewDesc("relay_edge_active_clients", "Clients connected to this edge, by transport (sse, ws, completion).", []string{"transport"}, nil),
			kind: prometheus.GaugeValue,
			collect: func(emit func(float64, ...string)) {
				for _, t := range Transports {
					emit(float64(state.ActiveClients(t)), string(t))
				}
			},
		}
		register(r, clients)
		register(r, prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "relay_sequence_gaps_total",
			Help: "Live frames whose predecessor had not arrived: a sequence gap, repaired by re-reading the log. It should stay at 0.",
		}, func() float64 { return float64(state.SequenceGaps()) }))
		register(r, &funcCollector{
			desc: prometheus.NewDesc("relay_edge_catch_ups_total", "Re-reads of a stream's log other than for a sequence gap, by reason (woken: frames dropped or NATS reconnected; idle: nothing for a keepalive interval).", []string{"reason"}, nil),
			kind: prometheus.CounterValue,
			collect: func(emit func(float64, ...string)) {
				for _, why := range []CatchUp{CatchUpWoken, CatchUpIdle} {
					emit(float64(state.CatchUps(why)), string(why))
				}
			},
		})
		register(r, prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "relay_edge_live_dropped_total",
			Help: "Live frames not queued because a client's queue was full; the client catches up from the log.",
		}, func() float64 { return float64(state.LiveDropped()) }))
	}
	if r.err != nil {
		return nil, r.err
	}
	return m, nil
}

// Request counts an answered request. route is the pattern the request
// matched ("" for none).
func (m *Edge) Request(route string, o Outcome) {
	if route == "" {
		route = "none"
	}
	m.requests.WithLabelValues(route, string(o)).Inc()
}

// TTFT records a new stream's time to first token, and the part the
// relay added when the upstream's own is known (upstream > 0).
func (m *Edge) TTFT(total, upstream time.Duration) {
	m.ttft.Observe(total.Seconds())
	if upstream > 0 {
		m.relayAdded.Observe(max(total-upstream, 0).Seconds())
	}
}

// InterChunk records the time since the client's previous chunk.
func (m *Edge) InterChunk(d time.Duration) { m.interChunk.Observe(d.Seconds()) }

// Delivered counts n chunks written to a client; resumed says the client
// resumed.
func (m *Edge) Delivered(t Transport, n int, resumed bool) {
	m.chunksDelivered.WithLabelValues(string(t)).Add(float64(n))
	if resumed {
		m.resumedChunks.Add(float64(n))
	}
}

// Resume counts a request that carried a cursor.
func (m *Edge) Resume(o ResumeOutcome) { m.resumes.WithLabelValues(string(o)).Inc() }

// ResumedTokens adds the estimated completion tokens a resumed session
// delivered.
func (m *Edge) ResumedTokens(n float64) {
	if n > 0 {
		m.resumedTokens.Add(n)
	}
}

// funcCollector is a labelled gauge or counter whose values are read at
// scrape time.
type funcCollector struct {
	desc    *prometheus.Desc
	kind    prometheus.ValueType
	collect func(emit func(v float64, labels ...string))
}

func (c *funcCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *funcCollector) Collect(ch chan<- prometheus.Metric) {
	c.collect(func(v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(c.desc, c.kind, v, labels...)
	})
}
