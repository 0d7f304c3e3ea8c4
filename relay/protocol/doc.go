// Package protocol is the wire contract between the relay's roles: the
// JetStream streams and subjects they share, the messages on them, and the
// cursor clients resume with. Every role imports it; nothing else defines a
// subject or a frame.
//
// # Protocol flow
//
//	client ──POST──▶ edge
//	                  │ 1. Meta            KV  relay_streams[<id>]       (Create: the id is new)
//	                  │ 1. Request         JS  relay.requests             (work queue, Nats-Msg-Id = <id>)
//	                  │    (both at once; the client learns the id when both are stored)
//	                  ▼
//	              worker ◀── pull, one message per free slot; InProgress while streaming
//	                  │ 3. claim frame     JS  relay.chunks.<id>          (fences any earlier writer; a
//	                  │                                                    redelivery reads the frames first)
//	                  │ 4. chunk frames    JS  relay.chunks.<id>          (seq 1..N, each chained on the last)
//	                  │ 5. end frame       JS  relay.chunks.<id>          (status done|incomplete|failed|cancelled)
//	                  │ 6. ack the request (only while it still owns the stream)
//	                  ▼
//	  RELAY_CHUNKS republishes every stored frame to relay.live.<id> with
//	  Nats-Sequence and Nats-Last-Sequence headers
//	                  ▼
//	edge ── one core subscription per stream it serves; history and gaps are
//	        read with batched direct gets; every client event carries a Cursor.
//
// # Fencing
//
// Every frame a worker appends is published with
// Nats-Expected-Last-Subject-Sequence set to the stream sequence of the
// frame before it. A worker that takes a stream over appends a claim frame
// chained on what it read, so the previous owner's next append fails with
// "wrong last sequence" and that worker abandons the stream without acking.
//
// # Cancellation
//
// An edge sets Meta.Cancelled (the durable record) and publishes on
// CancelSubject(<id>) (the prompt notice). The worker holding the stream
// closes its upstream call and appends an end frame with status cancelled;
// a worker that takes the request later finds the record first.
//
// # Cursors
//
// A client sees chunk frames and the end frame. Each carries a per-stream
// sequence (1, 2, 3, ... without gaps; the end frame is last) and is stored
// at a JetStream sequence; the pair is the Cursor ("<seq>-<jsseq>"), so a
// resume seeks straight to the next frame and can verify that the cursor
// belongs to the stream.
//
// # Worker liveness
//
// Every worker publishes a Heartbeat on LivenessSubject (core NATS, every
// worker.heartbeat_interval, default 500ms, on a connection of its own so
// that a busy main connection cannot delay it) describing the deliveries
// it holds (reply subject, request sequence, delivery count) and its
// liveness timeout (worker.liveness_timeout, default 1.5s). Every
// coordinator, and every worker unless worker.disable_peer_watch, watches
// them, also on a connection of its own:
//
//	worker A ── Heartbeat{beat n, full or delta} ──▶ relay.liveness ──▶ watchers (coordinators, workers B, C…)
//	watcher  ── "<instance>" or "" (lacks a set) ──▶ relay.liveness.sync ──▶ worker A: next beat full
//	           …silence for A's timeout…
//	watcher  ── KV Create relay_handovers[<seq>.<delivered>]   (exactly one watcher wins)
//	winner   ── "-NAK" to the delivery's reply subject          (the queue redelivers at once)
//	worker B ◀── the request; claim frame (fences A); continuation
//
// Heartbeats are numbered per instance (Beat 1, 2, 3… without gaps). The
// first, and every tenth interval's (every 5s by default), is full: it
// lists every delivery. The others, including the early one a worker
// sends soon after it took a request, are deltas: the deliveries Added and
// Removed (by sequence and delivery count) since the beat before. Every
// heartbeat carries Held, the size of the set. So a heartbeat's size
// follows the churn of requests, not how many are in flight: at 2,600 in
// flight a full heartbeat is ~400 KB, a delta ~100 bytes plus ~150 per
// request taken and ~30 per request let go.
//
// A watcher keeps each instance's set: a full beat replaces it, a delta
// changes it only if it is numbered right after the last beat heard. A
// watcher that missed a beat (a gap in the numbers, a count that does not
// match Held, a reconnect or a message dropped by its subscription, or it
// just started) forgets the set until the next full beat. Meanwhile it
// knows only the deliveries added in the beats it heard since the gap
// (none can have been removed unheard), hands over only those, and leaves
// the others to AckWait. It never NAKs from a set that may be out of
// date, since acks and NAKs are matched by the request's sequence only: a
// NAK of a delivery the worker let go of could take the request from its
// new owner. So as not to wait for the next periodic full beat, it asks
// for one on LivenessSyncSubject (naming the instance, at most once a
// second each; everyone at start and after losses); the worker answers
// within an interval, with at most one full beat an interval however many
// watchers ask.
//
// A watcher that does not hear its own echo (its connection is down or
// stalled, or it was paused) judges no one until it does. A worker's pulls
// expire within half its liveness timeout, so a paused worker holds no pull
// when its requests are redelivered. A draining worker hands its own
// streams over the same way, after checking that no one wrote to them
// after its last frame; AckWait remains the fallback for everything else.
//
// # Cluster-wide provider state
//
// Circuit breakers, shared Retry-After pauses, quota shares, canary ramps,
// the coordinator lease and provider health live in the KV buckets of
// SharedStateBuckets (state.go has who writes which key); every worker and
// edge follows them through a watch and changes them only by
// revision-checked updates, on transitions.
package protocol
