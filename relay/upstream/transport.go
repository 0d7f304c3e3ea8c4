package upstream

import (
	"context"
	"net/http"
	"time"
)

// Transport sends the calls to providers. A call whose Target asks for
// HTTP2PriorKnowledge on a plain http base URL goes over HTTP/2 without
// TLS (h2c, RFC 9113 §3.3); every other call goes as http.DefaultTransport
// sends it: HTTP/1.1 over plain TCP, and over TLS whatever ALPN settles
// (HTTP/2 with OpenAI, Anthropic and most hosted providers). It is the
// one place that builds the transports a relay calls providers with.
//
// Go's transport needs two http.Transports for this: one that allows
// HTTP/1.1 never tries h2c, and one that only speaks h2c cannot send an
// HTTP/1.1 request.
type Transport struct {
	std *http.Transport // HTTP/1.1, and HTTP/2 where ALPN picks it
	h2c *http.Transport // HTTP/2 with prior knowledge, plain TCP only
}

// NewTransport returns a Transport that keeps up to idlePerHost idle
// HTTP/1.1 connections to each provider host (at least 2).
// http.DefaultTransport keeps 2, so a worker running dozens of streams to
// one provider closes most connections when their streams end and dials
// (and, over TLS, handshakes) anew for the next request, which a client
// then waits for before its first token. Size idlePerHost to the calls
// that may run at once (worker.max_inflight). Its write buffer is smaller
// (transportWriteBuffer); everything else is as in http.DefaultTransport.
//
// Over h2c, the streams share connections: Go's server lets 250 run at
// once on one (http.HTTP2Config.MaxConcurrentStreams; the HTTP/2 default
// is 100, which the transport assumes until the server's settings
// arrive), and the transport dials another connection when every one it
// has is full (StrictMaxConcurrentRequests false), so a worker with more
// calls in flight than that never queues them behind the limit
// (TestTransportOpensAnotherH2CConnectionWhenOneIsFull). A burst of calls
// to a provider with no connection yet dials about one connection per
// call; the transport keeps those it needs and closes the rest unused.
// MaxConnsPerHost would bound that burst, but it also caps the streams in
// flight at its connections' share, queueing the calls past it, so it is
// left unset: a worker pulls requests a few at a time and spreads its
// retries (the streams of a connection that died fail together) with
// jitter, which bounds the bursts it makes.
func NewTransport(idlePerHost int) *Transport {
	std := http.DefaultTransport.(*http.Transport).Clone()
	std.MaxIdleConnsPerHost = max(idlePerHost, 2)
	// No cap over all hosts: the per-host cap, times the providers of the
	// catalog, bounds it.
	std.MaxIdleConns = 0
	// The default 90 s: a provider that keeps the connection open serves
	// the next request on it.
	std.IdleConnTimeout = 90 * time.Second
	std.WriteBufferSize = transportWriteBuffer

	h2c := std.Clone()
	h2c.Protocols = new(http.Protocols)
	h2c.Protocols.SetUnencryptedHTTP2(true)
	h2c.HTTP2 = &http.HTTP2Config{
		// One connection carries many streams, so a connection that died
		// without a word (a NAT dropped it) must not take every new call
		// to a stall timeout: a connection silent for h2cPingAfter is
		// pinged, and closed if no answer comes within as long again.
		SendPingTimeout: h2cPingAfter,
		PingTimeout:     h2cPingAfter,
	}
	return &Transport{std: std, h2c: h2c}
}

// h2cPingAfter is the silence after which an h2c connection is pinged,
// and how long it has to answer. A stream's keep-alive comments count as
// life, so a busy connection is never pinged.
const h2cPingAfter = 15 * time.Second

// RoundTrip sends req over h2c if its context is marked so (Target's
// HTTP2PriorKnowledge, through Target.NewRequest) and its URL is plain
// http; otherwise as http.DefaultTransport would.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme == "http" && priorKnowledge(req.Context()) {
		return t.h2c.RoundTrip(req)
	}
	return t.std.RoundTrip(req)
}

// CloseIdleConnections closes the idle connections of both protocols;
// http.Client.CloseIdleConnections calls it.
func (t *Transport) CloseIdleConnections() {
	t.std.CloseIdleConnections()
	t.h2c.CloseIdleConnections()
}

// priorKnowledgeKey marks a request's context for h2c.
type priorKnowledgeKey struct{}

// withPriorKnowledge marks ctx so that a Transport sends its request over
// h2c. The mark rides on the context rather than on the Transport's own
// list of hosts so that it follows the provider's setting, whichever
// client sends the request; another RoundTripper ignores it and speaks
// HTTP/1.1, which a server of both protocols (the fake upstream) answers
// too.
func withPriorKnowledge(ctx context.Context) context.Context {
	return context.WithValue(ctx, priorKnowledgeKey{}, true)
}

func priorKnowledge(ctx context.Context) bool {
	v, _ := ctx.Value(priorKnowledgeKey{}).(bool)
	return v
}

// transportWriteBuffer is the write buffer of each HTTP/1.1 connection to
// a provider, which lives as long as the connection: one per call in
// flight, and one per idle connection kept. It only ever holds a request's
// headers and the start of its body: once the headers are flushed, the
// rest of the body goes to the socket unbuffered, so 1 KiB instead of the
// default 4 KiB costs a large request one more write, not one per KiB.
// The read buffer stays at 4 KiB: a stream's events are read out of it.
const transportWriteBuffer = 1 << 10
