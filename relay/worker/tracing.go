package worker

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/relaydev/relay/relay/provider"
	"github.com/relaydev/relay/relay/tracing"
	"github.com/relaydev/relay/relay/wire"
)

// jobTrace is a job's span, and the retry cause its next attempt's span
// names.
type jobTrace struct {
	span trace.Span
	// cause is the error class of the latest failed attempt, "" after a
	// success.
	cause string
}

// traceJob starts the job's span, continuing the trace the request message
// carries (the edge's span): every delivery of the request, a takeover's
// included, joins the same trace. It returns ctx with the span.
func (j *job) traceJob(ctx context.Context) context.Context {
	ctx = tracing.ExtractNATS(ctx, j.header)
	ctx, j.trace.span = j.w.tracer.Start(ctx, "relay.job", trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(
		attribute.String("relay.stream_id", j.req.StreamID),
		attribute.String("relay.worker", j.w.id),
		attribute.String("relay.model", j.req.Model),
		attribute.Int64("relay.delivery", int64(j.delivery.Delivered)),
	))
	return ctx
}

// traceEnd ends the job's span with the status of its "job finished" line.
func (j *job) traceEnd(status string, err error) {
	span := j.trace.span
	span.SetAttributes(
		attribute.String("relay.status", status),
		attribute.Int("relay.attempts", j.attempts),
		attribute.Int("relay.chunks", j.chunks),
	)
	if err != nil && wire.Status(status) != wire.StatusCancelled {
		// The status, not the error's text: a provider's error can quote
		// the relay's credentials.
		span.SetStatus(codes.Error, status)
	}
	span.End()
}

// traceParent is the traceparent of the job's span, for its end frame; ""
// when the request carried no trace and this worker records none.
func (j *job) traceParent() string {
	return tracing.TraceParent(j.trace.span.SpanContext())
}

// appendClaim appends the job's claim frame in a span of its own. It ends
// at once, so it is exported even if the worker dies mid-answer, and the
// trace shows every worker that held the stream.
func (j *job) appendClaim() error {
	ctx, span := j.w.tracer.Start(j.logCtx, "relay.claim", trace.WithAttributes(attribute.String("relay.worker", j.w.id)))
	err := j.writer.append(ctx, wire.ClaimFrame(j.w.id, &j.req))
	if err != nil {
		span.SetStatus(codes.Error, "claim failed")
		span.RecordError(err)
	}
	span.End()
	return err
}

// traceAttempt starts the span of an upstream call of candidate c, the
// parent of the provider's own spans (the client sends its traceparent),
// and returns ctx with it and the function that ends it with the call's
// outcome.
func (j *job) traceAttempt(ctx context.Context, c *provider.Candidate, seam wire.Seam) (context.Context, func(outcome)) {
	attrs := []attribute.KeyValue{
		attribute.String("relay.provider", c.Provider.Name),
		attribute.String("relay.model", c.Model),
		attribute.Int("relay.attempt", j.attempts),
	}
	if seam != "" {
		attrs = append(attrs, attribute.String("relay.seam", string(seam)))
	}
	if j.trace.cause != "" {
		attrs = append(attrs, attribute.String("relay.retry_cause", j.trace.cause))
	}
	ctx, span := j.w.tracer.Start(ctx, "relay.attempt", trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	return ctx, func(out outcome) {
		switch {
		case out.logErr != nil:
			j.trace.cause = "chunk_log"
			span.SetStatus(codes.Error, "chunk log refused a frame")
			span.RecordError(out.logErr)
		case out.err != nil:
			j.trace.cause = out.class.String()
			span.SetAttributes(attribute.String("relay.error_class", j.trace.cause))
			span.SetStatus(codes.Error, j.trace.cause) // not the text: see traceEnd
		default:
			j.trace.cause = ""
			span.SetAttributes(attribute.String("relay.finish_reason", out.finishReason))
		}
		span.End()
	}
}
