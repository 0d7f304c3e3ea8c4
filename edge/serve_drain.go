package edge

import (
	"net/http"
	"strconv"
	"time"

	"github.com/relaydev/relay/relay/dialect/chat"
	"github.com/relaydev/relay/relay/wire"
)

// # Draining
//
// When Serve's context ends (SIGTERM in main) the edge drains:
//
//  1. http.Server.Shutdown closes the listener, so no connection is
//     accepted any more, and closes idle keep-alive connections.
//  2. Then every live client is ended (clients.close) and told to
//     reconnect, with the retry hint (Config.RetryHint):
//     - SSE: a last event without an id, "retry: <ms>" and
//     {"error":{...,"code":"edge_draining"}}, and no [DONE]. An EventSource
//     reconnects after the hint with its Last-Event-ID, the last frame it
//     got; an SDK raises the error, and its caller resumes with
//     GET /v1/streams/{id} and that cursor.
//     - WebSocket: a {"type":"reconnect","retry_ms":<ms>,"error":{...}}
//     message, then close 1001 (going away); the client reconnects and
//     resumes each stream after its last cursor.
//     - A "stream": false request waiting for its answer: 503 with code
//     edge_draining and Retry-After; X-Relay-Stream-Id names the stream,
//     which GET /v1/streams/{id} serves on another edge.
//     - Durable Streams (edge/durable): a waiting long-poll answers 204
//     at once, as its timeout would, and a live=sse response ends with a
//     control event at the offset it reached; the client reconnects from
//     there.
//  3. Requests that still arrive on open connections: a POST or a
//     WebSocket upgrade gets that 503 before anything is queued; a
//     GET /v1/streams/{id} gets the SSE reconnect event (an EventSource
//     gives up for good on an error status); /readyz answers 503.
//  4. Pending cancel_after timers are dropped. Serve returns once every
//     handler, WebSocket and SSE stream (those that took their connection
//     over from net/http too, serve_sse_conn.go) is gone, or when
//     shutdownTimeout ran out.
//
// Draining never touches a generation: its worker goes on, and a client
// that resumes elsewhere gets exactly the frames after its cursor.

// drainMessage is what a draining edge tells every client.
const drainMessage = "the edge is shutting down: reconnect and resume after your last cursor"

func drainError(message string) *wire.Error {
	return &wire.Error{Message: message, Type: wire.TypeServer, Code: CodeDraining, Status: http.StatusServiceUnavailable}
}

// writeDraining answers a request the draining edge will not serve: a 503
// with Retry-After, which clients and OpenAI SDKs retry, reaching another
// edge through the load balancer. For a refused POST nothing was queued;
// a waiting "stream": false request's generation runs on, and a retried
// POST starts a second one unless it carries an Idempotency-Key, which
// attaches it to the first (start_idempotency.go).
func writeDraining(w http.ResponseWriter, retry time.Duration, message string) {
	w.Header().Set("Retry-After", strconv.FormatInt(retryAfterSeconds(retry), 10))
	w.Header().Set("Connection", "close")
	writeError(w, drainError(message))
}

// retryAfterSeconds rounds the hint up to Retry-After's whole seconds.
func retryAfterSeconds(d time.Duration) int64 {
	return max(1, int64((d+time.Second-1)/time.Second))
}

// reconnectMessage is the last WebSocket message when the edge drains.
func reconnectMessage(retry time.Duration) wsOut {
	obj := chat.ErrorOf(drainError(drainMessage))
	return wsOut{Type: "reconnect", RetryMS: retry.Milliseconds(), Error: &obj}
}
