package edge

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/relaydev/relay/relay/relaytest"
	"github.com/relaydev/relay/relay/streams"
	"github.com/relaydev/relay/relay/tracing"
	"github.com/relaydev/relay/relay/wire"
)

// startEdgeWith serves an edge with deps' Tracer and Logger on top of the
// usual ones, until the test ends.
func (e *env) startEdgeWith(deps Deps) string {
	e.t.Helper()
	nc, js := relaytest.Connect(e.t, e.srv, streams.Topology{MemoryStorage: true})
	deps.NC, deps.JS, deps.Catalog = nc, js, testCatalog(e.t)
	if deps.Logger == nil {
		deps.Logger = relaytest.Logger(e.t)
	}
	s, err := New(Config{}, deps)
	if err != nil {
		e.t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	e.t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			e.t.Errorf("Serve: %v", err)
		}
	})
	return "http://" + ln.Addr().String()
}

// endedSpan waits for the span named name to end and returns it.
func endedSpan(t *testing.T, rec *tracetest.SpanRecorder, name string) sdktrace.ReadOnlySpan {
	t.Helper()
	var found sdktrace.ReadOnlySpan
	waitFor(t, func() bool {
		for _, s := range rec.Ended() {
			if s.Name() == name {
				found = s
				return true
			}
		}
		return false
	})
	return found
}

func spanAttr(s sdktrace.ReadOnlySpan, key string) string {
	for _, a := range s.Attributes() {
		if a.Key == attribute.Key(key) {
			return a.Value.Emit()
		}
	}
	return ""
}

func linked(s sdktrace.ReadOnlySpan, tid trace.TraceID) bool {
	for _, l := range s.Links() {
		if l.SpanContext.TraceID() == tid {
			return true
		}
	}
	return false
}

// A generation's request span starts a trace of its own (a client's
// traceparent is only linked), and the request message carries its
// traceparent to the workers. A resume links its span to the trace named
// by the stream's end frame.
func TestTracingRequestSpans(t *testing.T) {
	e := newEnv(t)
	rec := tracetest.NewSpanRecorder()
	url := e.startEdgeWith(Deps{Tracer: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))})
	e.startWorker(&worker{script: answer(3)})
	queued := make(chan *nats.Msg, 1)
	sub, err := e.nc.ChanSubscribe(wire.RequestSubject, queued)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()

	const clientParent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	res := do(t, http.MethodPost, url+"/v1/chat/completions", chatBody(true, "trace me"), http.Header{"Traceparent": {clientParent}})
	checkAnswer(t, readAll(t, res), 3)
	var msg *nats.Msg
	select {
	case msg = <-queued:
	case <-time.After(10 * time.Second):
		t.Fatal("no request message heard")
	}
	carried := tracing.ParseTraceParent(msg.Header.Get(tracing.HeaderTraceParent))
	if !carried.IsValid() {
		t.Fatalf("request message headers %v: no valid traceparent", msg.Header)
	}
	span := endedSpan(t, rec, "POST /v1/chat/completions")
	client := tracing.ParseTraceParent(clientParent)
	switch {
	case span.SpanContext().TraceID() != carried.TraceID() || span.SpanContext().SpanID() != carried.SpanID():
		t.Errorf("request message carries %s; want the request span %s", carried.TraceID(), span.SpanContext().TraceID())
	case span.SpanContext().TraceID() == client.TraceID():
		t.Error("the request span continued the client's trace; want a trace of the relay's own")
	case !linked(span, client.TraceID()):
		t.Errorf("request span links %v; want the client's span", span.Links())
	case spanAttr(span, "relay.stream_id") == "" || spanAttr(span, "http.route") != "/v1/chat/completions":
		t.Errorf("request span attributes %v; want relay.stream_id and http.route", span.Attributes())
	}

	// A stream ended by a worker of another trace, resumed after its first
	// chunk.
	const streamParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	frames := answer(2)(wire.Request{})
	frames[len(frames)-1].TraceParent = streamParent
	id := wire.NewStreamID()
	cursors := e.writeStream(id, wire.Meta{Model: testModel, Created: time.Now().Unix()}, frames)
	res = do(t, http.MethodGet, url+"/v1/streams/"+id+"?last_event_id="+e.seal(cursors[0]), "", nil)
	if body := readAll(t, res); !strings.Contains(body, "[DONE]") {
		t.Fatalf("resume: %s", body)
	}
	resumed := endedSpan(t, rec, "GET /v1/streams/{id}")
	if !linked(resumed, tracing.ParseTraceParent(streamParent).TraceID()) {
		t.Errorf("resume span links %v; want the stream's trace", resumed.Links())
	}
	awaitRunnersExited(t)
}

// lockedBuffer is a log destination safe for the edge's goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// A request refused with a 4xx is logged at debug with its reason: the
// status, the error's code and message, and the path without its query.
func TestRefusedRequestLoggedAtDebug(t *testing.T) {
	e := newEnv(t)
	var logs lockedBuffer
	url := e.startEdgeWith(Deps{Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	res := do(t, http.MethodPost, url+"/v1/chat/completions?token=secret", `{"model":`, nil)
	if res.StatusCode != http.StatusBadRequest {
		t.Fatalf("status %d; want 400", res.StatusCode)
	}
	var line string
	waitFor(t, func() bool {
		for l := range strings.SplitSeq(logs.String(), "\n") {
			if strings.Contains(l, `msg="request refused"`) {
				line = l
				return true
			}
		}
		return false
	})
	for _, want := range []string{"level=DEBUG", "status=400", "code=" + CodeInvalidJSON, "path=/v1/chat/completions", "reason="} {
		if !strings.Contains(line, want) {
			t.Errorf("log line %q lacks %s", line, want)
		}
	}
	if strings.Contains(line, "secret") {
		t.Errorf("log line %q holds the query", line)
	}
}
