package wire

import (
	"encoding/json"
	"time"
)

// Forwarding: the endpoints the relay passes to a provider without a
// durable stream (embeddings, legacy text completions). Nothing is stored:
// the answer travels from the worker to the edge as core NATS messages,
// and a lost one fails the request instead of being resumed.
//
//	edge ──pub ForwardSubject (queue ForwardQueue), reply ForwardReplySubject(<token>)──▶ worker
//	edge ◀── accepted, alive…, head, body…|event…, end ── on the reply subject, numbered 0, 1, 2…
//
// Every reply message carries HeaderForwardKind and HeaderForwardSeq. The
// edge reads them in order: a gap (a message dropped) or a silence longer
// than ForwardSilence (the worker is gone) ends the request; if nothing was
// written to the client yet, the edge sends it again to another worker.
// An answer larger than a NATS message (max_payload) is carried by several
// body messages, cut at ForwardPieceSize.

// ForwardEndpoint names a forwarded API; the provider's path is
// "/" + endpoint under its base URL.
type ForwardEndpoint string

// The forwarded endpoints.
const (
	EndpointEmbeddings  ForwardEndpoint = "embeddings"
	EndpointCompletions ForwardEndpoint = "completions"
)

// ForwardRequest is what an edge publishes on ForwardSubject.
type ForwardRequest struct {
	// ID names the request in logs and for the gate (fleet.CallInfo's
	// StreamID); it is not a stream.
	ID     string `json:"id"`
	Tenant string `json:"tenant,omitempty"`
	// Key names the caller's API key (Request.Key), whose usage the
	// worker records in the ledger.
	Key      string          `json:"key,omitempty"`
	Endpoint ForwardEndpoint `json:"endpoint"`
	// Model is the model the client asked for; the worker walks its
	// route as it does a generation's.
	Model string `json:"model"`
	// Stream: the client asked for server-sent events (completions only).
	Stream bool `json:"stream,omitempty"`
	// FailFast as in Request.
	FailFast bool `json:"fail_fast,omitempty"`
	// Body is the client's request, sent to the provider with its model
	// replaced by the candidate's.
	Body json.RawMessage `json:"body"`
}

// ForwardKind is the kind of one reply message (HeaderForwardKind).
type ForwardKind string

const (
	// ForwardAccepted: a worker took the request; no data.
	ForwardAccepted ForwardKind = "accepted"
	// ForwardAlive: the worker still works on it (every ForwardHeartbeat
	// while nothing else is sent); no data.
	ForwardAlive ForwardKind = "alive"
	// ForwardHeadKind: the provider answered; data is a ForwardHead.
	// Nothing of the answer precedes it.
	ForwardHeadKind ForwardKind = "head"
	// ForwardBody: the next piece of a non-streamed answer's body.
	ForwardBody ForwardKind = "body"
	// ForwardEvent: the data of one server-sent event of a streamed
	// answer, [DONE] excepted (a successful ForwardEnd stands for it).
	ForwardEvent ForwardKind = "event"
	// ForwardEndKind: the last message; data is a ForwardEnd.
	ForwardEndKind ForwardKind = "end"
)

// Headers of a reply message.
const (
	HeaderForwardKind = "Relay-Forward-Kind"
	// HeaderForwardSeq numbers a reply's messages from 0 without gaps.
	HeaderForwardSeq = "Relay-Forward-Seq"
)

// ForwardHead describes the provider's answer.
type ForwardHead struct {
	Status      int    `json:"status"`
	ContentType string `json:"content_type,omitempty"`
	Provider    string `json:"provider,omitempty"`
	Model       string `json:"model,omitempty"`
	// Size is the length of a non-streamed body, which the body messages
	// carry in full before the end.
	Size int `json:"size,omitempty"`
}

// ForwardEnd ends a reply: without Error, the answer is whole (a streamed
// one ends with [DONE]). With one, it failed; Retryable says that nothing
// of it reached the provider's answer yet and another worker may take the
// request (this worker is stopping or full).
type ForwardEnd struct {
	Error     *Error `json:"error,omitempty"`
	Retryable bool   `json:"retryable,omitempty"`
}

// Timing of the forwarding protocol, shared by both sides.
const (
	// ForwardHeartbeat is how often a worker sends ForwardAlive while it
	// has nothing else to send.
	ForwardHeartbeat = 500 * time.Millisecond
	// ForwardSilence is how long an edge waits for the next reply message
	// before it takes the worker for gone: five heartbeats, about the
	// liveness timeout after which a generation is handed over.
	ForwardSilence = 5 * ForwardHeartbeat
)

// ForwardPieceSize returns the size of the body pieces for a connection
// whose server takes messages of at most maxPayload bytes: what is left
// after room for the headers.
func ForwardPieceSize(maxPayload int64) int {
	const headroom = 4 << 10
	if maxPayload <= 2*headroom {
		return int(max(maxPayload/2, 1))
	}
	return int(maxPayload - headroom)
}

// MaxForwardBody bounds a non-streamed answer the relay forwards: it is
// held whole by the worker and by the edge, which answers it with a
// Content-Length. A larger one fails with a 502 that says so.
const MaxForwardBody = 128 << 20

// Codes of forwarding errors.
const (
	// CodeForwardTooLarge: the request or the answer does not fit.
	CodeForwardTooLarge = "forward_too_large"
	// CodeWorkerLost: the worker serving the request went away after
	// part of the answer reached the client.
	CodeWorkerLost = "worker_lost"
	// CodeNoWorker: no worker took the request.
	CodeNoWorker = "no_worker"
)
