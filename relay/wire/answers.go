package wire

import "time"

// # Cached answers
//
// A model whose `cache` is on keeps its completed answers, per tenant, so
// that a repeated request can still be answered when no provider can take
// it (or, in prefer mode, without calling one):
//
//	worker ── stream ended done ── KV Create relay_answers[<key>] = CachedAnswer (per-key TTL)
//	worker ── every candidate failed, nothing published ── KV Get relay_answers[<key>]
//	          found: its chunks and an end frame done, each marked Cached
//
// The key is the hex SHA-256 of the tenant, the model and the request body
// without the members that do not change the answer (the worker's
// answerKey), so tenants never share an entry. Only workers read or write
// the bucket.

// AnswerBucket holds one CachedAnswer per key.
const AnswerBucket = "relay_answers"

// AnswerMaxTTL is the bucket's age limit, and so the longest TTL a model's
// cache may ask for: an entry lives for its model's TTL (a per-key TTL) or
// this, whichever is shorter.
const AnswerMaxTTL = 7 * 24 * time.Hour

// CachedAnswer is a completed answer as a later stream replays it.
type CachedAnswer struct {
	// Chunks are the answer's chunk frames, in order, without what belongs
	// to the stream that produced them (sequence, attempt, seam, timing).
	Chunks       []Frame `json:"chunks"`
	FinishReason string  `json:"finish_reason"`
	StopSequence string  `json:"stop_sequence,omitempty"`
	// Usage is what the answer took when it was generated.
	Usage *Usage `json:"usage,omitempty"`
	// StreamID names the stream the answer was generated for, Stored when
	// (Unix milliseconds).
	StreamID string `json:"stream_id"`
	Stored   int64  `json:"stored"`
}
