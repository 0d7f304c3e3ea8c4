package tracing

import (
	"context"
	"net/http"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// HeaderTraceParent is the W3C Trace Context header, on HTTP requests and
// on the JetStream request message alike.
const HeaderTraceParent = "traceparent"

// w3c carries traceparent and tracestate, nothing else (no baggage: a
// client's baggage has no business reaching a provider).
var w3c = propagation.TraceContext{}

// InjectHTTP sets the traceparent of ctx's span on h (nothing without one).
func InjectHTTP(ctx context.Context, h http.Header) {
	w3c.Inject(ctx, propagation.HeaderCarrier(h))
}

// NATSHeader is a message header holding the traceparent of ctx's span,
// nil without one.
func NATSHeader(ctx context.Context) nats.Header {
	h := natsCarrier{}
	w3c.Inject(ctx, h)
	if len(h) == 0 {
		return nil
	}
	return nats.Header(h)
}

// ExtractNATS returns ctx with the remote span context h carries, if any.
func ExtractNATS(ctx context.Context, h nats.Header) context.Context {
	return w3c.Extract(ctx, natsCarrier(h))
}

// ExtractHTTP returns the span context an HTTP request's headers carry;
// invalid if none.
func ExtractHTTP(h http.Header) trace.SpanContext {
	return trace.SpanContextFromContext(w3c.Extract(context.Background(), propagation.HeaderCarrier(h)))
}

// TraceParent renders sc as a traceparent value; "" if sc is invalid.
func TraceParent(sc trace.SpanContext) string {
	h := natsCarrier{}
	w3c.Inject(trace.ContextWithSpanContext(context.Background(), sc), h)
	return nats.Header(h).Get(HeaderTraceParent)
}

// ParseTraceParent is the span context of a traceparent value; invalid if
// it is not one.
func ParseTraceParent(v string) trace.SpanContext {
	if v == "" {
		return trace.SpanContext{}
	}
	ctx := w3c.Extract(context.Background(), natsCarrier{HeaderTraceParent: {v}})
	return trace.SpanContextFromContext(ctx)
}

// natsCarrier reads and writes a NATS header by its exact keys: NATS
// headers are case-sensitive, and W3C's are lower case.
type natsCarrier nats.Header

func (c natsCarrier) Get(key string) string { return nats.Header(c).Get(key) }

func (c natsCarrier) Set(key, value string) { nats.Header(c).Set(key, value) }

func (c natsCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}
