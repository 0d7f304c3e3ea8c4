// Package breaker is the pure state machine of the relay's cluster-wide
// circuit breakers: one per model of a provider, or one per provider where
// its breaker.scope says so. It holds no lock, no clock and no
// connection: every transition is a function from the state read (with its
// KV revision) and the time to the next state, which the caller writes
// back with a revision-checked update (see package fleet). Every worker and
// edge keeps a local copy of every breaker, fed by a KV watch, so asking a
// breaker costs no round trip.
//
// # States
//
//	          trip (a worker's Tally: an outage, not weather)
//	closed ─────────────────────────────────────────────▶ open
//	  ▲                                                    │ cooldown ends
//	  │ the probe succeeded                                ▼
//	  └─────────────────────────────────────────────── half-open ──▶ open
//	                                    the probe failed: cooldown doubles,
//	                                    up to MaxCooldown
//
// While open, nothing is sent to the provider. Once the cooldown has
// passed, the first node to win the revision-checked Claim owns the one
// probe of the whole cluster: a real request (a worker's) or a health probe
// (the coordinator's, when no request comes). The probe's verdict resolves
// the half-open state; a neutral verdict (the client went away) releases
// the claim for someone else, and a claim whose owner went silent expires
// after ProbeTimeout.
//
// A breaker is a signal, not a wrapper: callers Decide before they call,
// and report the call's outcome once, at the end (cockroach's
// pkg/util/circuit, gobreaker's two-step breaker). What trips a breaker is
// counted by each worker over its own calls (Tally): counting every call
// in KV would make the breaker key the hottest key of the cluster. Any
// worker that sees Failures failures in a row (Envoy's consecutive-error
// rule), or a share of FailureRatio failures over a window of at least
// MinCalls calls (Envoy's and resilience4j's failure-rate rule), opens the
// breaker for everyone. A call that streamed content is a success even if
// it was cut later: long answers are cut and stalled now and then by a
// healthy provider, and counting those would open the breaker on weather.
package breaker
