package e2e

import (
	"compress/gzip"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/protobuf/proto"

	"github.com/relaydev/relay/e2e/procs"
	"github.com/relaydev/relay/relay/mockupstream"
	"github.com/relaydev/relay/relay/tracing"
	"github.com/relaydev/relay/relay/wire"
)

// recordedSpan is one span an OTLP export delivered, flattened.
type recordedSpan struct {
	Service, Name                 string
	TraceID, SpanID, ParentSpanID string
	Attrs                         map[string]string
	// Links are the trace ids of the span's links.
	Links []string
}

// otlpReceiver is an OTLP/HTTP collector in the test: it accepts the
// protobuf exports of /v1/traces and keeps their spans.
type otlpReceiver struct {
	url   string
	mu    sync.Mutex
	spans []recordedSpan
}

func startOTLPReceiver(t *testing.T) *otlpReceiver {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &otlpReceiver{url: "http://" + ln.Addr().String()}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", func(w http.ResponseWriter, req *http.Request) {
		body := io.Reader(req.Body)
		if req.Header.Get("Content-Encoding") == "gzip" {
			gz, err := gzip.NewReader(req.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = gz
		}
		data, err := io.ReadAll(body)
		var export coltracepb.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(data, &export)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.add(&export)
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(out)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return r
}

func (r *otlpReceiver) add(export *coltracepb.ExportTraceServiceRequest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range export.GetResourceSpans() {
		service := attrs(rs.GetResource().GetAttributes())["service.name"]
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				rec := recordedSpan{Service: service, Name: s.GetName(), TraceID: hex.EncodeToString(s.GetTraceId()),
					SpanID: hex.EncodeToString(s.GetSpanId()), ParentSpanID: hex.EncodeToString(s.GetParentSpanId()), Attrs: attrs(s.GetAttributes())}
				for _, l := range s.GetLinks() {
					rec.Links = append(rec.Links, hex.EncodeToString(l.GetTraceId()))
				}
				r.spans = append(r.spans, rec)
			}
		}
	}
}

// attrs renders attribute values as strings (ints in decimal).
func attrs(kvs []*commonpb.KeyValue) map[string]string {
	out := map[string]string{}
	for _, kv := range kvs {
		v := kv.GetValue()
		if _, ok := v.GetValue().(*commonpb.AnyValue_IntValue); ok {
			out[kv.GetKey()] = fmt.Sprint(v.GetIntValue())
			continue
		}
		out[kv.GetKey()] = v.GetStringValue()
	}
	return out
}

// find returns the spans received so far that match.
func (r *otlpReceiver) find(match func(recordedSpan) bool) []recordedSpan {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []recordedSpan
	for _, s := range r.spans {
		if match(s) {
			out = append(out, s)
		}
	}
	return out
}

// await waits until a span matching what is received and returns it.
func (r *otlpReceiver) await(t *testing.T, what string, match func(recordedSpan) bool) recordedSpan {
	t.Helper()
	var found []recordedSpan
	waitFor(t, 15*time.Second, what, func() bool {
		found = r.find(match)
		return len(found) > 0
	})
	return found[0]
}

// One request, its worker SIGKILLed mid-answer, the answer finished by
// another: one trace holds the edge's request span, both workers' claims,
// the heir's job and its takeover attempt, and the provider calls of both
// workers (the fake upstream received the trace's traceparent each time);
// the stream's end frame names that trace, and a resume of the stream on
// another edge links its own span to it.
func TestTracingOneTraceAcrossATakeover(t *testing.T) {
	const tokens = 80
	otlp := startOTLPReceiver(t)
	traced := procs.Settings{"tracing.endpoint": otlp.url, "tracing.export_interval": "100ms"}
	s := start(t, options{Processes: true, Mock: mockupstream.Config{Tokens: tokens, TokenInterval: 40 * time.Millisecond},
		Edges: 2, Workers: 2, EdgeSettings: traced, WorkerSettings: traced})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	msgs, want := prompt("Tracing test: the worker is killed mid-answer.", tokens)
	c, err := postStream(ctx, s.edgeProcs[0].URL, msgs, want, nil)
	must(t, err)
	defer c.close()
	must(t, c.readN(10))
	owner := s.owner(c.id, 1, 5*time.Second).Frame.Worker
	// The first owner's claim span is sent before it dies.
	ownerClaim := otlp.await(t, "the first owner's claim span", func(sp recordedSpan) bool {
		return sp.Name == "relay.claim" && sp.Attrs["relay.worker"] == owner
	})
	must(t, s.worker(owner).Kill())
	t.Logf("SIGKILLed %s after %d events", owner, c.tr.events)
	must(t, c.finish(ctx, func() string { return s.edgeProcs[0].URL }, nil))
	must(t, c.check())
	heir := s.owner(c.id, 2, 5*time.Second).Frame.Worker
	if heir == owner {
		t.Fatalf("%s claimed the stream twice", owner)
	}

	// The client read the end; the test's own subscription may hear it a
	// moment later.
	var end frameSeen
	waitFor(t, 5*time.Second, "the end frame", func() bool {
		var ok bool
		end, ok = s.frames.end(c.id)
		return ok
	})
	traceID := tracing.ParseTraceParent(end.Frame.TraceParent).TraceID().String()
	if end.Frame.Status != wire.StatusDone || !tracing.ParseTraceParent(end.Frame.TraceParent).IsValid() {
		t.Fatalf("end frame %+v; want done with a traceparent", end.Frame)
	}
	inTrace := func(name string, also func(recordedSpan) bool) func(recordedSpan) bool {
		return func(sp recordedSpan) bool {
			return sp.TraceID == traceID && sp.Name == name && (also == nil || also(sp))
		}
	}
	request := otlp.await(t, "the edge's request span", inTrace("POST /v1/chat/completions", func(sp recordedSpan) bool {
		return sp.Service == "relay-edge" && sp.Attrs["relay.stream_id"] == c.id
	}))
	if ownerClaim.TraceID != traceID {
		t.Errorf("the first owner's claim is in trace %s; want the request's %s", ownerClaim.TraceID, traceID)
	}
	otlp.await(t, "the heir's claim span", inTrace("relay.claim", func(sp recordedSpan) bool { return sp.Attrs["relay.worker"] == heir }))
	job := otlp.await(t, "the heir's job span", inTrace("relay.job", func(sp recordedSpan) bool {
		return sp.Service == "relay-worker" && sp.Attrs["relay.worker"] == heir && sp.Attrs["relay.status"] == "done"
	}))
	if job.ParentSpanID != request.SpanID {
		t.Errorf("the heir's job span has parent %s; want the request span %s", job.ParentSpanID, request.SpanID)
	}
	takeover := otlp.await(t, "the heir's takeover attempt", inTrace("relay.attempt", func(sp recordedSpan) bool {
		return sp.ParentSpanID == job.SpanID && sp.Attrs["relay.seam"] == "takeover"
	}))
	if takeover.Attrs["relay.provider"] != "mock" || takeover.Attrs["relay.model"] != "mock-1" || takeover.Attrs["relay.attempt"] != "2" {
		t.Errorf("takeover attempt attributes %v; want provider mock, model mock-1, attempt 2", takeover.Attrs)
	}
	if parents := s.mockStats().TraceParents[mockupstream.ConversationKey(msgs)]; len(parents) != 2 {
		t.Errorf("the fake upstream got traceparents %v; want one per call, 2", parents)
	} else {
		for i, p := range parents {
			if got := tracing.ParseTraceParent(p).TraceID().String(); got != traceID {
				t.Errorf("provider call %d carried trace %s; want %s", i+1, got, traceID)
			}
		}
		if got := tracing.ParseTraceParent(parents[1]).SpanID().String(); got != takeover.SpanID {
			t.Errorf("the heir's provider call has parent span %s; want its attempt span %s", got, takeover.SpanID)
		}
	}

	// A resume on the other edge, from the first chunk, after the end.
	first := s.frames.of(c.id)[1] // after the first claim
	if first.Frame.Kind != wire.KindChunk {
		t.Fatalf("frame after the claim: %+v", first.Frame)
	}
	stream, err := openSSE(ctx, http.MethodGet, s.edgeProcs[1].URL+"/v1/streams/"+c.id, nil, fmt.Sprintf("%d-%s", first.Frame.Seq, first.JSSeq))
	must(t, err)
	for {
		if _, err := stream.Next(); err != nil {
			if !errors.Is(err, io.EOF) {
				t.Fatalf("resume: %v", err)
			}
			break
		}
	}
	stream.Close()
	resume := otlp.await(t, "the resume's span", func(sp recordedSpan) bool {
		return sp.Name == "GET /v1/streams/{id}" && sp.Attrs["relay.stream_id"] == c.id
	})
	if resume.TraceID == traceID || !strings.Contains(strings.Join(resume.Links, ","), traceID) {
		t.Errorf("resume span in trace %s links %v; want a trace of its own linked to %s", resume.TraceID, resume.Links, traceID)
	}
}
