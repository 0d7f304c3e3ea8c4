// Package edge is the relay's client-facing role: an OpenAI-compatible HTTP
// API that queues generations for the workers and serves every stream from
// its durable log, so a client that lost its connection resumes exactly
// where it was, on any edge.
//
// # HTTP API
//
//	POST /v1/chat/completions   validate, store Meta, queue a Request; then stream it
//	                            as SSE ("stream": true) or answer one chat.completion
//	GET  /v1/streams/{id}       the same SSE stream, resumed after Last-Event-ID
//	                            (header) or last_event_id (query); EventSource-ready
//	DELETE /v1/streams/{id}     cancel the generation; 200 with the terminal status,
//	                            or 202 "cancelling" (cancel.go)
//	GET  /v1/ws                 WebSocket: several streams per connection (handler_ws.go)
//	GET  /v1/models             the Catalog's models as an OpenAI list
//	GET  /healthz, /readyz      liveness; readiness = NATS connected and assets set up
//
// Every error body has OpenAI's shape {"error":{"message","type","param","code"}},
// so official SDKs raise it.
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
//	RELAY_CHUNKS ──republish──▶ relay.live.<id>   (Nats-Sequence, Nats-Last-Sequence)
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
package edge
