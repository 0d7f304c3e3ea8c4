// Package fleet is the one home of the cluster-wide provider state:
// circuit breakers, shared Retry-After pauses, retry budgets, rate-limit
// shares, canary ramps, the coordinator lease and provider health, kept in
// the KV buckets of wire.SharedStateBuckets (wire/state.go has who writes
// which key). Every role reaches that state through this package:
//
//   - the worker asks a SharedGate to admit each upstream call and tells
//     its Ticket how the call ended (call.go is the seam, gate.go and
//     admit.go the policy), and how each stream whose route the gate
//     ordered ended for its client (canary_route.go);
//   - the edge opens a View of the breakers to refuse a model whose every
//     provider is open (View.AllOpen), and a TenantLimiter for the
//     per-tenant request limits;
//   - the coordinator holds the Lease, probes idle breakers through the
//     same View.Transition the workers use, and splits quota shares from
//     the nodes' demand reports (View.FollowDemand, QuotaNode), which also
//     carry the workers' first-token times: it publishes their sum, and a
//     worker's gate answers hedging's quantiles from it (ttft.go).
//
// The policies themselves are pure and live below: breaker (the state
// machine, no clock and no lock), quota (shares, budgets, windows),
// canary (ramps) and slots (the tenants' fair share of the workers'
// slots, which the edges apply). A change of breaker policy touches this package and
// those only.
//
// A Table is one bucket's local copy, fed by a watch and changed by
// revision-checked updates; a View is the set of tables one node follows;
// ReadStatus gathers everything for GET /v1/relay/status.
//
// Every type here reads the way a region's mirror must be read: reads and
// watches go to the bucket handle the node was given (local in every
// region), writes go through the same handle (to the origin), revisions
// are only handed back to the bucket, never compared, and a write is
// applied to the local copy by its writer instead of waiting for the watch
// to echo it.
package fleet
