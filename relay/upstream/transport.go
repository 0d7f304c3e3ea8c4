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
// that may run at once (worker.max_inflight). Everything else is as in
// http.DefaultTransport.
func NewTransport(idlePerHost int) *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = max(idlePerHost, 2)
	// No cap over all hosts: the per-host cap, times the providers of the
	// catalog, bounds it.
	t.MaxIdleConns = 0
	// The default 90 s: a provider that keeps the connection open serves
	// the next request on it.
	t.IdleConnTimeout = 90 * time.Second
	return t
}
