// Package relay is the worker role: it takes generation requests off the
// work queue, calls an upstream provider, and appends the answer to the
// stream's chunk log, from which edges serve clients (see the protocol
// package's "Protocol flow").
//
// A Worker runs MaxInflight slots. Each slot pulls one request at a time,
// so no request waits in a client-side buffer while its AckWait runs out,
// and reports progress on it at a quarter of AckWait while it streams.
//
// A job reads what the stream already holds before it writes: a stream that
// ended is only acknowledged (a duplicate or a redelivery after the ack was
// lost); otherwise the job appends a claim frame chained on the last stored
// frame, which fences any earlier owner.
//
// The job then runs the attempt loop (loop.go): it walks the request's
// route of providers and models (provider.Catalog.Route), retries
// transient failures with full-jitter backoff (package backoff), falls back
// along the route when a model or provider has spent its retries, and
// continues after every failure the text already published (earlier
// owners' included), in prefill or prompt mode, stripping a repeat at the
// seam (overlap.go), so the client sees one answer. The first chunk of
// every attempt after the first names its seam, provider, model and
// attempt. A Gate is asked before each call and told each outcome once: the
// seam for cluster-wide breakers and quotas. API keys rotate: a refused key
// is replaced by the next at once, and key files are re-read when they
// change and on Reload (SIGHUP).
//
// Every stream ends with one end frame: done (the provider finished),
// incomplete (text was published, then the loop gave up), or failed
// (nothing was published), with the usage of every call, its cost and the
// number of calls.
//
// A job that loses its stream to another writer (chunklog.ErrFenced), or
// whose worker shuts down, stops without a terminal frame and without
// acknowledging, so the queue hands the request to another worker after
// AckWait.
package relay
