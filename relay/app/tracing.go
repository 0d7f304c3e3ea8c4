package app

import (
	"context"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/relaydev/relay/relay/config"
	"github.com/relaydev/relay/relay/tracing"
)

// tracingFlushTimeout bounds sending the last spans when a process stops.
const tracingFlushTimeout = 5 * time.Second

// startTracing returns the process's TracerProvider (a no-op one unless
// tracing.endpoint is set), its service named after role, and the
// function that sends its last spans when the process stops.
func startTracing(cfg config.Config, role config.Role, logger *slog.Logger) (trace.TracerProvider, func(), error) {
	tp, shutdown, err := tracing.Start(cfg.Tracing, "relay-"+string(role), logger)
	if err != nil {
		return nil, nil, err
	}
	if cfg.Tracing.Enabled() {
		logger.Info("tracing on", "endpoint", cfg.Tracing.Endpoint)
	}
	return tp, func() {
		ctx, cancel := context.WithTimeout(context.Background(), tracingFlushTimeout)
		defer cancel()
		if err := shutdown(ctx); err != nil {
			logger.Warn("tracing: last spans not sent", "err", err)
		}
	}, nil
}
