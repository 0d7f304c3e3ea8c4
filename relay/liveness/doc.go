// Package liveness hands a silent worker's requests to another worker at
// once, well before AckWait: workers publish heartbeats (Beats builds them),
// watchers follow them (Watcher) and hand the deliveries of a worker that
// fell silent over (HandOver), one NAK per delivery however many watchers
// see it. The messages are wire.Heartbeat and wire.Delivery.
//
// Every worker publishes a wire.Heartbeat on wire.LivenessSubject (core
// NATS, every worker.heartbeat_interval, default 500ms, on a connection of
// its own so that a busy main connection cannot delay it) describing the
// deliveries it holds (reply subject, request sequence, delivery count) and
// its liveness timeout (worker.liveness_timeout, default 1.5s). Every
// coordinator, and every worker unless worker.disable_peer_watch, watches
// them, also on a connection of its own:
//
//	worker A ── Heartbeat{beat n, full or delta} ──▶ relay.liveness ──▶ watchers (coordinators, workers B, C…)
//	watcher  ── "<instance>" or "" (lacks a set) ──▶ relay.liveness.sync ──▶ worker A: next beat full
//	           …silence for A's timeout…
//	watcher  ── request relay.liveness.probe.<instance> ──▶ worker A: answers if it can
//	           …no responders (A's connection is gone), or no answer for A's timeout
//	            while nothing says the watcher or the server is behind…
//	watcher  ── KV Create relay_handovers[<seq>.<delivered>]   (exactly one watcher wins;
//	                                                             500 at once, then 1,000/s)
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
// A late heartbeat is not yet a dead worker: before taking anything, a
// watcher probes the silent worker (probe.go). A crashed worker's
// connection is gone, so the server answers "no responders" at once and
// its requests move one timeout after its last beat, as before; a worker
// that answers keeps them (its beats were only late, as they can be under
// a burst on a loaded machine, and a handover would fence a live
// generation and load the server, making more beats late); a paused or
// hung one loses them after one more timeout without an answer.
//
// A judgement must not feed itself: handovers load the server, which
// makes more heartbeats and probe answers late. So a probe that timed out
// hands nothing over while the watcher or the server may be the one
// behind (hold.go): the watcher's own echo came later than a quarter of
// the worker's timeout during its silence; another worker is silent past
// its timeout too, or one was handed over on a timed-out probe less than
// two timeouts ago; or a probe answered less than two timeouts ago took
// longer than a quarter of a timeout. The held worker keeps its requests
// and is probed again: "no responders" (hard evidence) hands it over
// whatever the signs, and so does a timed-out probe once they are gone; a
// beat or an answer clears it. Each held judgement is logged at info with
// the count so far (judgements_held).
//
// And a watcher paces its handovers (pace.go): at most 500 at once, then
// 1,000 a second (500 per default heartbeat interval), from a queue that
// a goroutine of its own drains while the watcher keeps judging, and that
// waits while the watcher's echo is late: a tenth of what a watcher can
// write even when it judges wrongly, while a dead worker's requests move
// within seconds (e2e/BENCHMARKS.md, "The handover pace"). What the pace defers
// waits, logged with the count of handovers deferred so far
// (handovers_deferred). If the worker is heard again meanwhile, what is
// left stays with it. Nothing is handed over once the worker was last
// seen longer than AckWait ago: the server has redelivered its requests
// by then, and a NAK, matched by the request's sequence only, would take
// one from its new owner.
//
// A watcher that does not hear its own echo (its connection is down or
// stalled, or it was paused) judges no one until it does. A worker's pulls
// expire within half its liveness timeout, so a paused worker holds no pull
// when its requests are redelivered. A draining worker hands its own
// streams over the same way, after checking that no one wrote to them
// after its last frame; AckWait remains the fallback for everything else.
package liveness
