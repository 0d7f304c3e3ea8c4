package worker

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/relaydev/relay/relay/mockupstream"
	"github.com/relaydev/relay/relay/relaytest"
	"github.com/relaydev/relay/relay/tracing"
	"github.com/relaydev/relay/relay/wire"
)

func spanAttr(s sdktrace.ReadOnlySpan, key string) string {
	for _, a := range s.Attributes() {
		if a.Key == attribute.Key(key) {
			return a.Value.Emit()
		}
	}
	return ""
}

// A job continues the trace its request message carries: a job span whose
// parent is the message's span, a claim span, and one span per upstream
// attempt, whose traceparent the provider receives; the retry after a cut
// names its seam and its cause. The end frame carries the job span's
// traceparent.
func TestJobContinuesTheRequestsTrace(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	h := start(t, setup{mock: mockupstream.Config{Tokens: 20, TokenInterval: -1}, noWorker: true})
	h.runWorker(Config{}, Deps{NC: h.nc, JS: h.js, Catalog: h.catalog, Logger: h.logger, Topology: h.topology,
		Tracer: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))})

	const parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	id := wire.NewStreamID()
	content := "[[mock: cut_after=5]] traced"
	body, _ := json.Marshal(map[string]any{"model": "mock-1", "messages": userMessages(content)})
	data, _ := json.Marshal(wire.Request{StreamID: id, Model: "mock-1", Body: body, Created: time.Now().Unix()})
	msg := &nats.Msg{Subject: wire.RequestSubject, Data: data, Header: nats.Header{tracing.HeaderTraceParent: {parent}}}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := h.js.PublishMsg(ctx, msg, jetstream.WithMsgID(id)); err != nil {
		t.Fatal(err)
	}
	end := endOf(h.waitEnd(id))
	h.waitJob(id)

	var job sdktrace.ReadOnlySpan
	relaytest.Eventually(t, 5*time.Second, 5*time.Millisecond, func() bool {
		for _, s := range rec.Ended() {
			if s.Name() == "relay.job" {
				job = s
				return true
			}
		}
		return false
	})
	remote := tracing.ParseTraceParent(parent)
	if job.Parent().SpanID() != remote.SpanID() || job.SpanContext().TraceID() != remote.TraceID() || spanAttr(job, "relay.status") != "done" {
		t.Errorf("job span %s (parent %s, status %q); want a child of the message's span %s, done", job.SpanContext().TraceID(), job.Parent().SpanID(), spanAttr(job, "relay.status"), remote.SpanID())
	}
	if got := tracing.ParseTraceParent(end.TraceParent); got.SpanID() != job.SpanContext().SpanID() || got.TraceID() != remote.TraceID() {
		t.Errorf("end frame traceparent %q; want the job span's", end.TraceParent)
	}
	var attempts []sdktrace.ReadOnlySpan
	claims := 0
	for _, s := range rec.Ended() {
		switch {
		case s.Name() == "relay.claim" && s.Parent().SpanID() == job.SpanContext().SpanID():
			claims++
		case s.Name() == "relay.attempt" && s.Parent().SpanID() == job.SpanContext().SpanID():
			attempts = append(attempts, s)
		}
	}
	slices.SortFunc(attempts, func(a, b sdktrace.ReadOnlySpan) int { return a.StartTime().Compare(b.StartTime()) })
	if claims != 1 || len(attempts) != 2 {
		t.Fatalf("%d claim and %d attempt spans under the job; want 1 and 2", claims, len(attempts))
	}
	first, second := attempts[0], attempts[1]
	if spanAttr(first, "relay.error_class") != "transient" || spanAttr(first, "relay.attempt") != "1" || spanAttr(first, "relay.provider") != "mock" {
		t.Errorf("first attempt %v; want attempt 1 on mock, failed transient", first.Attributes())
	}
	if spanAttr(second, "relay.seam") != string(wire.SeamContinuation) || spanAttr(second, "relay.retry_cause") != "transient" || spanAttr(second, "relay.finish_reason") != "stop" {
		t.Errorf("second attempt %v; want a continuation caused by a transient failure, finished", second.Attributes())
	}
	parents := h.mock.Stats().TraceParents[mockupstream.ConversationKey(userMessages(content))]
	if len(parents) != 2 {
		t.Fatalf("the provider got traceparents %v; want 2", parents)
	}
	for i, p := range parents {
		if got := tracing.ParseTraceParent(p).SpanID(); got != attempts[i].SpanContext().SpanID() {
			t.Errorf("call %d carried span %s; want its attempt's %s", i+1, got, attempts[i].SpanContext().SpanID())
		}
	}
}
