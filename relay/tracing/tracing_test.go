package tracing

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"
)

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string // "" for valid
	}{
		{Config{}, ""},
		{Config{Endpoint: "http://collector:4318", SampleRatio: 0.25, ExportInterval: time.Second}, ""},
		{Config{Endpoint: "collector:4318"}, "tracing.endpoint"},
		{Config{Endpoint: "ftp://collector"}, "tracing.endpoint"},
		{Config{SampleRatio: 1.5}, "tracing.sample_ratio"},
		{Config{SampleRatio: -0.1}, "tracing.sample_ratio"},
		{Config{ExportInterval: -time.Second}, "tracing.export_interval"},
	} {
		err := tc.cfg.Validate("tracing")
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%+v: %v; want valid", tc.cfg, err)
		case tc.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.want+":")):
			t.Errorf("%+v: %v; want an error naming %s", tc.cfg, err, tc.want)
		}
	}
}

// A span's context crosses a NATS header as a lower-case W3C traceparent
// and comes back out whole; a context without a span adds no header.
func TestNATSHeaderRoundTrip(t *testing.T) {
	sc := ParseTraceParent("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
	if !sc.IsValid() || !sc.IsSampled() {
		t.Fatalf("parsed %+v; want a valid sampled span context", sc)
	}
	h := NATSHeader(trace.ContextWithSpanContext(context.Background(), sc))
	if got := h.Get(HeaderTraceParent); got != TraceParent(sc) || got == "" {
		t.Fatalf("header %v; want traceparent %s", h, TraceParent(sc))
	}
	back := trace.SpanContextFromContext(ExtractNATS(context.Background(), h))
	if back.TraceID() != sc.TraceID() || back.SpanID() != sc.SpanID() || !back.IsRemote() {
		t.Errorf("extracted %+v; want %+v, remote", back, sc)
	}
	if h := NATSHeader(context.Background()); h != nil {
		t.Errorf("header %v without a span; want none", h)
	}
	if ParseTraceParent("garbage").IsValid() || ParseTraceParent("").IsValid() {
		t.Error("garbage parsed as a span context")
	}
}

// Off, Start hands out a provider that records nothing; on, the spans
// reach the endpoint's /v1/traces, at the latest when it shuts down.
func TestStart(t *testing.T) {
	tp, shutdown, err := Start(Config{}, "relay-test", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	_, span := Tracer(tp).Start(context.Background(), "off")
	if span.IsRecording() {
		t.Error("tracing off records spans")
	}
	span.End()
	if err := shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}

	var exports atomic.Int32
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if r.URL.Path == "/v1/traces" && r.Header.Get("Content-Type") == "application/x-protobuf" {
			exports.Add(1)
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer collector.Close()
	tp, shutdown, err = Start(Config{Endpoint: collector.URL, ExportInterval: time.Hour}, "relay-test", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	_, span = Tracer(tp).Start(context.Background(), "on")
	if !span.IsRecording() {
		t.Error("tracing on records no span")
	}
	span.End()
	if err := shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if exports.Load() != 1 {
		t.Errorf("%d exports reached the collector; want the one flushed at shutdown", exports.Load())
	}
}
