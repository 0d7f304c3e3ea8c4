// Package worker is the relay worker role: it takes generation requests off the
// work queue, calls an upstream provider, and appends the answer to the
// stream's chunk log, from which edges serve clients (see the wire
// package's "Protocol flow").
//
// A Worker runs MaxInflight slots. Each slot pulls one request at a time,
// so no request waits in a client-side buffer while its AckWait runs out,
// and reports progress on it at a quarter of AckWait while it streams.
//
// A slot waiting for its turn to pull also takes requests that edges
// offer before they queue them (offer.go, wire "Offers"), and starts them
// at once; their deliveries, passed on by whichever worker the queue gave
// them to, are adopted by the running job. A worker whose max_inflight is
// at most maxWaitingPulls keeps every free slot in a pull and takes no
// offer: its requests all come from the queue.
//
// A worker publishes a heartbeat describing the requests it holds (all of
// them every few seconds, what changed in between), and watches its peers',
// on a NATS connection of their own (see package liveness): when a worker
// falls silent for its liveness timeout, a watcher hands its requests over
// at once, well before AckWait. Its pulls expire within half that timeout,
// so a paused worker holds none when its requests come back.
//
// Drain (SIGTERM) stops pulling, lets streams finish within DrainTimeout
// and hands the rest over: each stops its upstream call, publishes what it
// received and gives its request back with a NAK, so the next worker
// continues it at once. Ending Run's context hands every stream over at
// once.
//
// A client's cancellation reaches a job as a notice on the stream's cancel
// subject (one wildcard subscription per worker), or as Meta.Cancelled in
// the stream's Meta record when the job starts: the job closes its upstream call, appends an end frame
// cancelled and acks. The Gate hears a cancelled call as breaker.Neutral.
//
// Chunk-log writes and reads that fail for any reason but a lost stream
// (NATS restarting, a replica election) are retried for AppendRetry while
// the upstream keeps streaming into memory.
//
// A redelivered job reads what the stream already holds before it writes: a
// stream that ended is only acknowledged (a duplicate or a redelivery after
// the ack was lost); otherwise the job appends a claim frame chained on the
// last stored frame, which fences any earlier owner, and then calls. A
// first delivery has nothing to read: unless it waited long in the queue
// (then its metadata is read first, for a cancellation), it calls its
// provider while its claim frame, chained on nothing, is being stored, and
// publishes only once the claim is (first_delivery.go). Should the stream
// hold frames after all (a request queued twice), the claim is fenced, the
// call dropped, and the job reads the stream as a redelivery does. Once a
// job's end frame is stored its slot is free; its usage record and its
// ack wait up to 20 ms for the other streams that end meanwhile, and go
// together with theirs (settle.go).
//
// The job then runs the attempt loop (loop.go): it walks the request's
// route of providers and models (provider.Catalog.Route), retries
// transient failures with full-jitter backoff (package backoff), falls
// back along the route when a model or provider has spent its retries, and
// continues after every failure the text already published (earlier
// owners' included), in prefill or prompt mode, in prompt mode stripping a
// repeat at the seam (overlap.go), so the client sees one answer. The
// first chunk of every attempt after the first names its seam, provider,
// model and attempt. A Gate is asked before each call and told each
// outcome once: the seam for cluster-wide breakers and quotas. A gate that
// orders routes (canary routing) is also told how each stream ended for
// its client (judge.go). API keys rotate: a refused key is replaced by the
// next at once, and key files are re-read when they change and on Reload
// (SIGHUP); the ring itself is package apikeys. Each key is checked before
// it takes traffic (keycheck.go): a refused key is reported and set
// aside, an unverified one waits while a verified one serves.
//
// A model with first_token_sla hedges (hedge.go, hedge_race.go): a call
// with no token by then (or by the provider's hedge_after quantile of the
// fleet's first-token times) is joined by the next open candidate of the
// route, asked of the gate fail-fast and within the worker's hedge budget;
// the first call to produce a token is the attempt whose answer is
// published, and the other is cancelled before anything of it is, its
// usage counted as any call's.
//
// Every stream ends with one end frame: done (the provider finished),
// incomplete (text was published, then the loop gave up), failed (nothing
// was published) or cancelled (by the client), with the usage of every
// call, its cost and the number of calls.
//
// A model whose cache is on (provider.Cache) keeps each answer that ended
// done, per tenant, in wire.AnswerBucket; a request that would end failed
// because no provider could take it is answered from there instead, if an
// identical one was kept (in prefer mode, a temperature-0 request before
// any call), every frame marked Cached (answer_cache.go).
//
// Besides generations, a worker serves the requests edges forward without
// a durable stream (/v1/embeddings, /v1/completions; forward.go): one of
// the queue group on wire.ForwardSubject takes each, up to max_inflight at
// once, walks the same route with the same gate and keys, and answers on
// the edge's reply subject. Nothing of them is stored or handed over: a
// stopping worker ends them, and the edge retries those whose client has
// nothing yet on another worker.
//
// A job that loses its stream to another writer (chunklog.ErrFenced) stops
// without a terminal frame, without acknowledging and without a NAK: acks
// are matched by sequence only, and the request is another worker's now.
// A job whose chunk log stays unavailable beyond AppendRetry stops the same
// way, and the queue hands its request to another worker after AckWait.
package worker
