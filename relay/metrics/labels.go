package metrics

import (
	"net/http"

	"github.com/relaydev/relay/relay/wire"
)

// Outcome is how the edge answered an HTTP request.
type Outcome string

const (
	// OutcomeOK: 1xx-3xx, including every stream that started (its own
	// end is counted by relay_streams_total) and WebSocket upgrades.
	OutcomeOK Outcome = "ok"
	// OutcomeInvalid: a 4xx other than those below: the client's mistake.
	OutcomeInvalid Outcome = "invalid"
	// OutcomeNotFound: 404 and 410 (unknown or expired streams, URLs).
	OutcomeNotFound Outcome = "not_found"
	// OutcomeRejected: 401, 403 and 429: authentication, authorisation and
	// rate limits.
	OutcomeRejected Outcome = "rejected"
	// OutcomeUnavailable: 503, e.g. NATS down or the edge draining.
	OutcomeUnavailable Outcome = "unavailable"
	// OutcomeError: any other 5xx.
	OutcomeError Outcome = "error"
)

// OutcomeOf classifies an HTTP status; 0 (nothing written, or a hijacked
// connection) counts as ok.
func OutcomeOf(status int) Outcome {
	switch {
	case status < 400:
		return OutcomeOK
	case status == http.StatusNotFound, status == http.StatusGone:
		return OutcomeNotFound
	case status == http.StatusUnauthorized, status == http.StatusForbidden, status == http.StatusTooManyRequests:
		return OutcomeRejected
	case status < 500:
		return OutcomeInvalid
	case status == http.StatusServiceUnavailable:
		return OutcomeUnavailable
	}
	return OutcomeError
}

// Transport is how a client follows a stream.
type Transport string

const (
	TransportSSE        Transport = "sse"
	TransportWebSocket  Transport = "ws"
	TransportCompletion Transport = "completion" // "stream": false
)

// Transports lists every Transport, for gauges that report each.
var Transports = []Transport{TransportSSE, TransportWebSocket, TransportCompletion}

// ResumeOutcome is how the edge answered a request that carried a cursor.
type ResumeOutcome string

const (
	// ResumeAccepted: the stream is served after the cursor.
	ResumeAccepted ResumeOutcome = "accepted"
	// ResumeNotFound: the stream is unknown or expired.
	ResumeNotFound ResumeOutcome = "not_found"
	// ResumeExpired: the frame at the cursor expired (410).
	ResumeExpired ResumeOutcome = "expired"
	// ResumeInvalid: the cursor is malformed or names another stream.
	ResumeInvalid ResumeOutcome = "invalid"
	// ResumeUnavailable: NATS could not be read.
	ResumeUnavailable ResumeOutcome = "unavailable"
)

// ResumeOutcomeOf classifies the answer to a resume by its status (0: it
// was accepted).
func ResumeOutcomeOf(status int) ResumeOutcome {
	switch {
	case status == 0 || status < 400:
		return ResumeAccepted
	case status == http.StatusNotFound:
		return ResumeNotFound
	case status == http.StatusGone:
		return ResumeExpired
	case status < 500:
		return ResumeInvalid
	}
	return ResumeUnavailable
}

// CatchUp is why an edge re-read a stream's log other than a sequence gap
// (which has its own family, relay_sequence_gaps_total).
type CatchUp string

const (
	// CatchUpWoken: frames were dropped for the client, or the edge
	// reconnected to NATS.
	CatchUpWoken CatchUp = "woken"
	// CatchUpIdle: nothing arrived for a keepalive interval.
	CatchUpIdle CatchUp = "idle"
)

// JobOutcome is how a worker's job ended.
type JobOutcome string

const (
	JobDone       JobOutcome = "done"
	JobIncomplete JobOutcome = "incomplete"
	JobFailed     JobOutcome = "failed"
	JobCancelled  JobOutcome = "cancelled"
	// JobFenced: another worker took the stream over; this job stopped
	// without acking.
	JobFenced JobOutcome = "fenced"
	// JobAbandoned: the chunk log stayed unavailable; the request is left
	// to AckWait.
	JobAbandoned JobOutcome = "abandoned"
	// JobHandedOver: a draining worker gave the request back.
	JobHandedOver JobOutcome = "handed_over"
	// JobAlreadyEnded: a duplicate delivery of an ended stream.
	JobAlreadyEnded JobOutcome = "already_ended"
)

var jobOutcomes = []JobOutcome{JobDone, JobIncomplete, JobFailed, JobCancelled, JobFenced, JobAbandoned, JobHandedOver, JobAlreadyEnded}

// JobOutcomeOf maps the status word of a worker's "job finished" line;
// anything unknown is abandoned.
func JobOutcomeOf(status string) JobOutcome {
	switch o := JobOutcome(status); o {
	case JobDone, JobIncomplete, JobFailed, JobCancelled, JobFenced, JobAbandoned, JobHandedOver, JobAlreadyEnded:
		return o
	}
	return JobAbandoned
}

// streamStatus is a terminal status as a label value, and whether it is
// one.
func streamStatus(o JobOutcome) (wire.Status, bool) {
	switch s := wire.Status(o); s {
	case wire.StatusDone, wire.StatusIncomplete, wire.StatusFailed, wire.StatusCancelled:
		return s, true
	}
	return "", false
}

// Seam is why an upstream call was made.
type Seam string

const (
	// SeamFirst: the stream's first call.
	SeamFirst        Seam = "first"
	SeamRetry        Seam = "retry"
	SeamContinuation Seam = "continuation"
	SeamFallback     Seam = "fallback"
	SeamTakeover     Seam = "takeover"
)

var seams = []Seam{SeamFirst, SeamRetry, SeamContinuation, SeamFallback, SeamTakeover}

// SeamOf maps a chunk's seam ("" for the first call).
func SeamOf(s wire.Seam) Seam {
	switch s {
	case wire.SeamRetry:
		return SeamRetry
	case wire.SeamContinuation:
		return SeamContinuation
	case wire.SeamFallback:
		return SeamFallback
	case wire.SeamTakeover:
		return SeamTakeover
	}
	return SeamFirst
}

// BreakerState is a circuit breaker's state.
type BreakerState string

const (
	BreakerClosed   BreakerState = "closed"
	BreakerOpen     BreakerState = "open"
	BreakerHalfOpen BreakerState = "half_open"
)

// BreakerStates lists every state, for the state gauge.
var BreakerStates = []BreakerState{BreakerClosed, BreakerOpen, BreakerHalfOpen}

// Direction says which way tokens went.
type Direction string

const (
	// DirectionIn: prompt tokens.
	DirectionIn Direction = "in"
	// DirectionOut: completion tokens.
	DirectionOut Direction = "out"
)

// Label values that stand for many.
const (
	// Other is every provider, model or tenant that is not configured.
	Other = "other"
	// DefaultTenant is the tenant of requests without one (no
	// authentication).
	DefaultTenant = "default"
)

// Names bounds the provider, model and tenant label values to the
// configured ones. The zero value knows no names: every provider and model
// is "other", every tenant but the default one too.
type Names struct {
	providers, models, tenants map[string]bool
}

// NewNames returns Names that pass the given values through.
func NewNames(providers, models, tenants []string) Names {
	set := func(values []string) map[string]bool {
		m := make(map[string]bool, len(values))
		for _, v := range values {
			m[v] = true
		}
		return m
	}
	return Names{providers: set(providers), models: set(models), tenants: set(tenants)}
}

// Provider is p if it is configured, else "other".
func (n Names) Provider(p string) string { return known(n.providers, p) }

// Model is m if it is configured, else "other".
func (n Names) Model(m string) string { return known(n.models, m) }

// Tenant is t if it is configured, "default" if empty, else "other".
func (n Names) Tenant(t string) string {
	if t == "" {
		return DefaultTenant
	}
	return known(n.tenants, t)
}

func known(set map[string]bool, v string) string {
	if set[v] {
		return v
	}
	return Other
}
