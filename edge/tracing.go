package edge

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/relaydev/relay/relay/tracing"
	"github.com/relaydev/relay/relay/wire"
)

// traced gives every API request (under /v1/) a span, the root of the
// trace that the request's workers and providers continue
// (relay/README.md "Tracing"). A traceparent the client sent is linked, not continued: the
// edge faces the internet, and a client must not pick the trace ids or
// the sampling of the relay's traces.
//
// The span ends when the handler has returned and the stream's session
// (if any) has closed: an SSE stream taken over from net/http
// (serve_sse_conn.go) outlives its handler.
func (s *Server) traced(next http.Handler) http.Handler {
	traceParentKey := http.CanonicalHeaderKey(tracing.HeaderTraceParent)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/v1/") {
			next.ServeHTTP(w, r)
			return
		}
		opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer), trace.WithNewRoot(),
			trace.WithAttributes(attribute.String("http.request.method", r.Method))}
		// Most requests carry no traceparent: they skip its extraction.
		if _, sent := r.Header[traceParentKey]; sent {
			if sc := tracing.ExtractHTTP(r.Header); sc.IsValid() {
				opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc}))
			}
		}
		ctx, span := s.tracer.Start(r.Context(), r.Method, opts...)
		rs := &requestSpan{span: span}
		rs.holds.Store(1)
		next.ServeHTTP(w, r.WithContext(context.WithValue(ctx, requestSpanKey{}, rs)))
		if p, ok := ctx.Value(routeKey{}).(*string); ok && *p != "" {
			span.SetName(r.Method + " " + *p)
			span.SetAttributes(attribute.String("http.route", *p))
		}
		// A hijacked connection records 101: a WebSocket, or an SSE
		// stream taken over (serve_sse_conn.go), whose status is not known here.
		if rec, ok := w.(*statusRecorder); ok && rec.status != 0 && rec.status != http.StatusSwitchingProtocols {
			span.SetAttributes(attribute.Int("http.response.status_code", rec.status))
			if rec.status >= 500 {
				span.SetStatus(codes.Error, http.StatusText(rec.status))
			}
		}
		rs.release()
	})
}

// requestSpanKey holds a request's *requestSpan in its context.
type requestSpanKey struct{}

// requestSpan is a request's span and the count of those that hold it
// open: the handler, and the session of a stream it serves.
type requestSpan struct {
	span  trace.Span
	holds atomic.Int32
}

// holdSpan holds r's span open until release, and names stream id on it;
// nil if r has none.
func holdSpan(r *http.Request, id string) *requestSpan {
	rs, _ := r.Context().Value(requestSpanKey{}).(*requestSpan)
	if rs == nil {
		return nil
	}
	rs.holds.Add(1)
	rs.span.SetAttributes(attribute.String("relay.stream_id", id))
	return rs
}

func (rs *requestSpan) release() {
	if rs != nil && rs.holds.Add(-1) == 0 {
		rs.span.End()
	}
}

// linkEnd links the span to the trace of the stream that end ended, when
// that is another trace: a resume links to the request's.
func (rs *requestSpan) linkEnd(end *wire.Frame) {
	if rs == nil {
		return
	}
	sc := tracing.ParseTraceParent(end.TraceParent)
	if sc.IsValid() && sc.TraceID() != rs.span.SpanContext().TraceID() {
		rs.span.AddLink(trace.Link{SpanContext: sc, Attributes: []attribute.KeyValue{attribute.String("relay.link", "stream")}})
	}
}

// traceHeader is the header of stream id's request message: the
// traceparent of ctx's span, which the workers continue. It names the
// stream on the span.
func traceHeader(ctx context.Context, id string) nats.Header {
	trace.SpanFromContext(ctx).SetAttributes(attribute.String("relay.stream_id", id))
	return tracing.NATSHeader(ctx)
}
