package upstream

import (
	"net/http"
	"time"
)

// NewTransport returns an HTTP transport for calling providers that keeps
// up to idlePerHost idle connections to each provider host (at least 2).
// http.DefaultTransport keeps 2, so a worker running dozens of streams to
// one provider closes most connections when their streams end and dials
// (and, over TLS, handshakes) anew for the next request, which a client
// then waits for before its first token. Size idlePerHost to the calls
// that may run at once (worker.max_inflight). Its write buffer is smaller
// (transportWriteBuffer); everything else is as in http.DefaultTransport.
func NewTransport(idlePerHost int) *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = max(idlePerHost, 2)
	// No cap over all hosts: the per-host cap, times the providers of the
	// catalog, bounds it.
	t.MaxIdleConns = 0
	// The default 90 s: a provider that keeps the connection open serves
	// the next request on it.
	t.IdleConnTimeout = 90 * time.Second
	t.WriteBufferSize = transportWriteBuffer
	return t
}

// transportWriteBuffer is the write buffer of each HTTP/1.1 connection to
// a provider, which lives as long as the connection: one per call in
// flight, and one per idle connection kept. It only ever holds a request's
// headers and the start of its body: once the headers are flushed, the
// rest of the body goes to the socket unbuffered, so 1 KiB instead of the
// default 4 KiB costs a large request one more write, not one per KiB.
// The read buffer stays at 4 KiB: a stream's events are read out of it.
const transportWriteBuffer = 1 << 10
