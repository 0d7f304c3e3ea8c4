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
// them without a round trip.
//
//	worker: end frame appended ─► Create usage.<month>.<tenant>.<key>.<stream id> = Record
//	edge:   watch usage.<month>.> ─► Tally (sums by tenant, key and day) ─► admission, GET /v1/relay/usage
package spend
