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
// frame, which fences any earlier owner. If an earlier owner had published
// text, the job continues that text with a prefill continuation instead of
// starting over, so the client sees one answer without repeats.
//
// A job that loses its stream to another writer (chunklog.ErrFenced), or
// whose worker shuts down, stops without a terminal frame and without
// acknowledging, so the queue hands the request to another worker after
// AckWait.
package relay
