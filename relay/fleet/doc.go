// Package cluster is the KV glue of the relay's cluster-wide provider
// state (wire.SharedStateBuckets): a Table is one bucket's local copy,
// fed by a watch and changed by revision-checked updates; a Lease elects
// the active coordinator; a QuotaNode reports a node's demand and enforces
// the share the coordinator gave it; ReadStatus gathers everything for
// GET /v1/relay/status.
//
// Every type here reads the way a region's mirror must be read: reads and
// watches go to the bucket handle the node was given (local in every
// region), writes go through the same handle (to the origin), revisions
// are only handed back to the bucket, never compared, and a write is
// applied to the local copy by its writer instead of waiting for the
// watch to echo it.
package fleet
