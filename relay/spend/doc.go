// Package spend holds what tenants' spend caps share between the roles:
// the periods budgets are counted over (the UTC day and month), the
// budgets and how usage compares with them, and the ledger of usage in
// wire.UsageBucket.
//
// The ledger is per-stream idempotent: the worker that appends a stream's
// end frame records the stream's usage under a key named by the stream id,
// with a create, which succeeds once (Store). A second observation of the
// same end (a redelivery that finds the stream ended, a retry after a lost
// acknowledgement) finds the key and adds nothing, so no count depends on
// a read-modify-write race between workers. Every edge keeps the sums of
// the current month's records from a watch (Tally) and admits against
// them without a round trip. A forwarded request (embeddings, legacy
// completions) is recorded the same way under its request id, by the
// worker that answered it, from the provider's usage.
//
// As usage is known only at a request's end, an edge reserves each
// request's largest possible cost at admission (Reserve): a Hold, in the
// key of its scope (hold.<tenant> and hold.<tenant>.<key>), which maps
// request ids to holds. Every reservation is a read of that key and an
// Update at the revision read, tried again when another edge wrote in
// between, so the reservations of a scope are serialized cluster-wide
// and each sees every hold before it. A hold counts until the Tally sees
// its request's record (then the record's cost counts instead: never
// neither, never both), until it is released (the request was not
// served), or until it expires (HoldTTL: its edge died). Writers drop
// such holds as they write, settledGrace after the record was seen, so
// that a node whose watch lags still counts the hold.
//
//	worker: end frame appended ─► Create usage.<month>.<tenant>.<key>.<stream id> = Record
//	edge:   watch usage.<month>.> ─► Tally (sums by tenant, key and day) ─► admission, GET /v1/relay/usage
//	edge:   admission ─► Get hold.<scope> (rev R) ─► used + held under the budget? ─► Update(+hold, R)
package spend
