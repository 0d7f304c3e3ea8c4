package wire

import (
	"encoding/json"
	"slices"
)

// Request is the work-queue message for one generation.
type Request struct {
	StreamID string `json:"stream_id"`
	Tenant   string `json:"tenant,omitempty"`
	// Key names the API key of the tenant that started the stream
	// (spend.KeyID), which its usage is counted against; empty for the
	// anonymous tenant.
	Key string `json:"key,omitempty"`
	// Model is the model the client asked for.
	Model string `json:"model"`
	// Body is the client's chat completion request, validated by the edge.
	// Workers forward its fields to the provider.
	Body json.RawMessage `json:"body"`
	// Created is the Unix time the edge accepted the request; it is the
	// "created" field of every chunk object.
	Created int64 `json:"created"`
	// FailFast: the client would rather fail at once than wait for a
	// provider that is paused, behind an open breaker or over its rate
	// limit (the edge's X-Relay-Fail-Fast header, or its key's
	// fail_fast). By default a request waits for the provider, up to a
	// bound.
	FailFast bool `json:"fail_fast,omitempty"`
	// RequestID is the client's X-Request-Id, which calls to the
	// provider carry (provider request_headers); empty if it sent none.
	RequestID string `json:"request_id,omitempty"`
	// Models are the models the request's key may use (its api_keys
	// models): the worker leaves every step of the route on another model
	// out, fallbacks included. Empty: any.
	Models []string `json:"models,omitempty"`
}

// Allows reports whether the request's key may be answered by model.
func (r *Request) Allows(model string) bool {
	return len(r.Models) == 0 || slices.Contains(r.Models, model)
}

// Meta is what an edge needs to serve a stream it did not accept: whose it
// is, and what its chunk objects say. A stream's first claim frame carries
// it (ClaimFrame); an edge also stores it in MetaBucket when no worker took
// the request's offer, so that a stream queued with no frames yet is
// known, and to record a cancellation (wire "Offers").
type Meta struct {
	Tenant  string `json:"tenant,omitempty"`
	Model   string `json:"model"`
	Created int64  `json:"created"`
	// Cancelled is set (by a revision-checked update) when a client cancels
	// the stream; a worker that takes the request then ends it cancelled
	// without publishing a chunk, and without calling a provider unless it
	// is a first delivery picked up within moments of being queued, whose
	// call starts while the metadata is read and stops as soon as it is.
	Cancelled bool `json:"cancelled,omitempty"`
}

// ClaimFrame is the frame by which worker takes the stream of req,
// carrying the stream's Meta.
func ClaimFrame(worker string, req *Request) Frame {
	return Frame{Kind: KindClaim, Worker: worker, Tenant: req.Tenant, Model: req.Model, Created: req.Created}
}

// ClaimMeta is the Meta a claim frame carries; ok is false for a frame
// that is no claim, or a claim written before claims carried it.
func ClaimMeta(f Frame) (m Meta, ok bool) {
	if f.Kind != KindClaim || f.Created == 0 {
		return Meta{}, false
	}
	return Meta{Tenant: f.Tenant, Model: f.Model, Created: f.Created}, true
}

// Health is the coordinator's view of one provider: its last probe, its
// breaker and the workers' recent failures.
type Health struct {
	Provider string `json:"provider"`
	// State is green (answering), yellow (answering slowly, recent
	// failures, or its breaker half-open) or red (not answering, or its
	// breaker open).
	State     string `json:"state"`
	LatencyMS int64  `json:"latency_ms"`
	LastError string `json:"last_error,omitempty"`
	CheckedAt int64  `json:"checked_at"`
	// Breaker is the phase of the provider's breaker (the worst of its
	// models' when each has one), empty before any transition.
	Breaker string `json:"breaker,omitempty"`
	// LastFailureAt is when a worker's call last failed (unix seconds),
	// zero if none did since the workers started.
	LastFailureAt int64 `json:"last_failure_at,omitempty"`
}

// Health states.
const (
	HealthGreen  = "green"
	HealthYellow = "yellow"
	HealthRed    = "red"
)
