package tracing

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Name is the instrumentation scope of the relay's spans.
const Name = "github.com/relaydev/relay"

// Start returns the TracerProvider of a process that runs as service
// (relay-edge, relay-worker…), and the function that sends what it holds
// and stops it. With tracing off it returns a no-op provider. Export
// failures are logged.
func Start(cfg Config, service string, logger *slog.Logger) (trace.TracerProvider, func(context.Context) error, error) {
	if !cfg.Enabled() {
		return noop.NewTracerProvider(), func(context.Context) error { return nil }, nil
	}
	exp, err := otlptracehttp.New(context.Background(),
		otlptracehttp.WithEndpointURL(strings.TrimRight(cfg.Endpoint, "/")+"/v1/traces"))
	if err != nil {
		return nil, nil, fmt.Errorf("tracing: exporter: %w", err)
	}
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { logger.Warn("tracing: export failed", "err", err) }))
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", service))),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(cmp.Or(cfg.SampleRatio, 1)))),
		sdktrace.WithBatcher(exp, sdktrace.WithBatchTimeout(cmp.Or(cfg.ExportInterval, DefaultExportInterval))),
	)
	return tp, tp.Shutdown, nil
}

// Tracer is tp's tracer for the relay's spans; a nil tp is a no-op one.
func Tracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		tp = noop.NewTracerProvider()
	}
	return tp.Tracer(Name)
}
