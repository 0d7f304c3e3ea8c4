// Package quota holds the pure pieces of the relay's shared limits: a token
// bucket that each node runs at the rate of its share of a cluster-wide
// limit, the allocation that splits a limit into shares by demand, the
// demand meter each node reports, and the retry budget.
//
// # Why shares
//
// A limit shared by a fleet (a provider's requests and tokens per minute,
// a tenant's requests per minute over all edges) cannot be one KV counter
// that every request updates: compare-and-swap on one hot key collapses
// under contention (e2e/BENCHMARKS.md, "Shared limits as shares"). Instead
// each node
// reports its demand in a key of its own about once a second, the active
// coordinator splits every limit into shares in proportion to the demand
// (Allocate) and writes each node its share, and each node enforces its
// share locally with a token bucket (Bucket), with no round trip on the
// hot path. KV traffic grows with the number of nodes, not of requests.
// The price is a lag of about one report interval before a share follows
// the demand, and a bounded overshoot (see Bucket).
//
// # Retry budget
//
// Retries are capped per worker (Budget): at most Ratio of the requests a
// worker sent to a provider in the last Window, plus MinRetries. A ratio
// needs no coordination: if every worker keeps r_i ≤ ratio·q_i, the fleet
// keeps Σr ≤ ratio·Σq, and the work queue spreads requests evenly over
// workers, so no worker starves. MinRetries is the reserve of a quiet
// worker: enough for one request's whole retry depth and then some, so a
// lightly loaded cluster retries as a plain SDK would, and it adds at most
// MinRetries per worker and window to what a provider sees. A call that
// continues an answer the provider was streaming when it was cut is not a
// retry to the budget (the caller does not ask it): the budget keeps
// retries off a provider that fails, and one that streams does not.
package quota
