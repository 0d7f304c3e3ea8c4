package wire

import (
	"crypto/sha256"
	"encoding/hex"
)

// # Idempotency
//
// A POST that carries an Idempotency-Key (or X-Request-Id) header starts at
// most one generation per key and tenant:
//
//	edge ── KV Create relay_idempotency[IdempotencyKey(tenant, key)] = IdempotencyRecord
//	        won:  the record names a fresh stream id; Meta and Request follow as usual
//	        lost: read the record; same body hash → serve its stream (running or
//	              finished); other body → 409; older than edge.idempotency_window →
//	              replace it (revision-checked Update) and start a new stream
//
// Records expire with streams.retention, so a record never outlives the
// stream it names.

// IdempotencyBucket holds one IdempotencyRecord per idempotency key.
const IdempotencyBucket = "relay_idempotency"

// IdempotencyRecord is what an idempotency key started.
type IdempotencyRecord struct {
	StreamID string `json:"stream_id"`
	// BodySHA256 is the hex SHA-256 of the request body, which a repeated
	// request must match.
	BodySHA256 string `json:"body_sha256"`
	// Created is the Unix time in milliseconds the record was written.
	Created int64 `json:"created"`
}

// IdempotencyKey is the bucket key of a client's idempotency key within a
// tenant: the hex SHA-256 of both, so that the client's key never appears
// in a subject and keys of different tenants never meet.
func IdempotencyKey(tenant, key string) string {
	h := sha256.New()
	h.Write([]byte(tenant))
	h.Write([]byte{0})
	h.Write([]byte(key))
	return hex.EncodeToString(h.Sum(nil))
}
