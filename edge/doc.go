// Package edge is the relay's client-facing role: an OpenAI-compatible HTTP
// API that queues generations for the workers and serves every stream from
// its durable log, so a client that lost its connection resumes exactly
// where it was, on any edge.
//
// # HTTP API
//
//	POST /v1/chat/completions   validate, offer and queue a Request (wire "Offers"); then stream it
//	                            as SSE ("stream": true) or answer one chat.completion
//	GET  /v1/streams/{id}       the same SSE stream, resumed after Last-Event-ID
//	                            (header) or last_event_id (query); EventSource-ready
//	DELETE /v1/streams/{id}     cancel the generation; 200 with the terminal status,
//	                            or 202 "cancelling" (cancel.go)
//	POST /v1/responses          the Responses API: translated into a chat completion and
//	                            queued the same way; its frames rendered as Responses
//	                            events (responses_events.go) or one Response
//	GET  /v1/responses/{id}     the Response so far; with ?stream=true its events after
//	                            ?starting_after=N, on any edge ("resp_" + stream id)
//	POST /v1/responses/{id}/cancel  cancel.go, answered with the Response
//	POST /v1/messages           Anthropic's Messages API: translated into a chat completion
//	                            (messages_request.go) and queued the same way; rendered as
//	                            Anthropic's events, each with a resumable id
//	                            (messages_events.go), or one Message
//	GET  /v1/messages/{id}      the Message so far; with Last-Event-ID (or Accept:
//	                            text/event-stream) its events after it, on any edge
//	                            ("msg_" + stream id)
//	POST /v1/messages/count_tokens  an estimate (messages_count.go)
//	GET  /v1/ws                 WebSocket: several streams per connection (handler_ws.go)
//	GET  /v1/models             the Catalog's models as an OpenAI list
//	POST /v1/embeddings, /v1/completions  forwarded to a worker over core NATS, not
//	                            durable streams (handler_forward.go, forward_exchange.go)
//	GET  /healthz, /readyz      liveness; readiness = NATS connected and assets set up
//
// Every error body has OpenAI's shape {"error":{"message","type","param","code"}},
// so official SDKs raise it; under /v1/messages, Anthropic's
// {"type":"error","error":{"type","message"}} (messages_errors.go).
//
// # Front door
//
// The API faces the internet; each concern has its file:
//
//	auth.go           Authorization: Bearer <key>, checked against SHA-256 hashes in constant time;
//	                  401 invalid_api_key. A key names a tenant; only the tenant sees its streams
//	                  (another tenant gets the unknown stream's 404)
//	resume_token.go   X-Relay-Resume-Token (and relay.resume_token in the first SSE event, the
//	                  WebSocket "started" message): GET /v1/streams/{id}?token= without a key;
//	                  403 invalid_resume_token when forged, expired or for another stream
//	idempotency.go    Idempotency-Key / X-Request-Id: one generation per key and tenant; replays
//	                  get the same stream (Idempotent-Replayed: true), another body 409
//	                  idempotency_key_reused
//	request.go        body size (413 body_too_large), message count and max_tokens
//	                  (400 limit_exceeded), the key's models (404 model_not_found), types and
//	                  ranges of the common parameters (400 invalid_value / invalid_json)
//	follower.go       a slow client catches up from JetStream in bounded batches; it never
//	                  holds back the hub, the worker or other clients
//	tenant_gate.go    a tenant's backlog waits here for its fair share of the workers' slots,
//	                  never in the queue ahead of another tenant's first request
//	handler_ws.go     WebSocket close codes: 1003 garbage, 1008 flooding, 1009 too large
//	cors.go           edge.cors_allowed_origins: preflights, exposed headers, WebSocket origins
//	sse.go            Cache-Control: no-cache, no-transform; X-Accel-Buffering: no; retry:
//	sse_conn.go       over HTTP/1.1 an SSE response takes its connection over from net/http:
//	                  a stream waiting for its next token holds no goroutine but its
//	                  connection's reader, and no buffer; once it ended, the connection
//	                  goes back to net/http for the client's next request (keepalive.go)
//
// Nothing a client sends as a credential (keys, tokens) is logged or echoed
// in an error.
//
// A generation outlives its client: when the client that started it goes
// away, the disconnect policy (disconnect.go, orphans.go) lets it run on or
// cancels it once no client on any edge follows it. When the edge itself
// stops, it drains (drain.go): every live client is told to reconnect and
// resumes on another edge.
//
// # Read path
//
// One edge serves many thousands of concurrent streams, so it never creates
// a JetStream consumer per client:
//
//	RELAY_CHUNKS[_<k>] ──republish──▶ relay.live.<id>   (Nats-Sequence, Nats-Last-Sequence)
//	                                 │ one core subscription per stream served here,
//	                                 │ all delivering into one channel (hub)
//	                                 ▼
//	                           dispatcher ──non-blocking──▶ follower queue (ClientBuffer)
//	                                                             │
//	  history and gaps: batched direct gets (chunklog.Reader) ──▶ follower ──▶ SSE / WebSocket
//
// A follower joins the hub before it reads history, so no frame falls
// between the two. A live frame is taken only if its Nats-Last-Sequence is
// the last frame the follower has; anything else (a full queue, a message
// lost in a reconnect) is repaired by reading the log after that frame.
//
// Reading the log is what costs: the server scans it from the follower's
// last frame through every other stream's frames stored since. So a stream
// this edge starts is followed before its request is queued and read
// live only; an idle or woken follower looks up its stream's last frame
// (answered from the server's subject index) before it reads; a resume
// starts its first, small read while the stream and cursor are checked;
// and a failed read is retried while the client waits, with keepalives
// (follower.go).
package edge
