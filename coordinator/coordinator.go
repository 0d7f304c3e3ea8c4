// Package coordinator is the role that keeps cluster-wide state in
// JetStream KV. Today it probes every provider and publishes its health,
// and watches the workers' heartbeats to hand a dead worker's requests to
// another worker at once (protocol "Worker liveness"); circuit breakers,
// shared quotas and canary routing build on the same buckets. Workers never
// wait for it: with the coordinator down, requests still flow, and the
// workers watch each other. Several coordinators may run: each handover is
// recorded once in a KV bucket, so only one of them acts on it.
package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/relay/protocol"
	"github.com/relaydev/relay/relay/provider"
)

// Config of the coordinator. The zero value means the defaults.
type Config struct {
	// HealthInterval is the time between two probes of a provider (zero:
	// 30s).
	HealthInterval time.Duration `koanf:"health_interval"`
	// HealthTimeout bounds one probe (zero: 5s).
	HealthTimeout time.Duration `koanf:"health_timeout"`
	// SlowThreshold marks a provider yellow when a probe takes longer
	// (zero: 2s).
	SlowThreshold time.Duration `koanf:"slow_threshold"`
	// Listen is host:port of the coordinator's /healthz and /readyz (zero:
	// 127.0.0.1:8082). Used by main.
	Listen string `koanf:"listen"`
}

func (c Config) withDefaults() Config {
	if c.HealthInterval == 0 {
		c.HealthInterval = 30 * time.Second
	}
	if c.HealthTimeout == 0 {
		c.HealthTimeout = 5 * time.Second
	}
	if c.SlowThreshold == 0 {
		c.SlowThreshold = 2 * time.Second
	}
	if c.Listen == "" {
		c.Listen = "127.0.0.1:8082"
	}
	return c
}

// Validate names the first invalid field under prefix.
func (c Config) Validate(prefix string) error {
	switch {
	case c.HealthInterval < 0:
		return fmt.Errorf("%s.health_interval: must not be negative", prefix)
	case c.HealthTimeout < 0:
		return fmt.Errorf("%s.health_timeout: must not be negative", prefix)
	case c.SlowThreshold < 0:
		return fmt.Errorf("%s.slow_threshold: must not be negative", prefix)
	}
	return nil
}

// Deps are the coordinator's connections.
type Deps struct {
	// JS is JetStream on the coordinator's connection, which also carries
	// the workers' heartbeats. Required.
	JS jetstream.JetStream
	// Topology sizes the handover bucket if the coordinator creates it.
	Topology protocol.Topology
	Catalog  *provider.Catalog
	// HTTP calls the providers (zero: http.DefaultClient).
	HTTP   *http.Client
	Logger *slog.Logger
}

// Coordinator probes providers, publishes their health, and hands the
// requests of silent workers over.
type Coordinator struct {
	cfg  Config
	deps Deps
	name string
}

// New validates cfg and returns a coordinator.
func New(cfg Config, deps Deps) (*Coordinator, error) {
	if err := cfg.Validate("coordinator"); err != nil {
		return nil, err
	}
	if deps.JS == nil {
		return nil, errors.New("coordinator: Deps.JS is required")
	}
	if deps.HTTP == nil {
		deps.HTTP = http.DefaultClient
	}
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.DiscardHandler)
	}
	host, _ := os.Hostname()
	return &Coordinator{cfg: cfg.withDefaults(), deps: deps, name: fmt.Sprintf("coordinator@%s-%d", host, os.Getpid())}, nil
}

// ListenAddr is the configured ops address, with its default applied.
func (c *Coordinator) ListenAddr() string { return c.cfg.Listen }

// Run probes every provider each HealthInterval and watches the workers'
// liveness until ctx ends.
func (c *Coordinator) Run(ctx context.Context) error {
	kv, err := c.deps.JS.KeyValue(ctx, protocol.HealthBucket)
	if err != nil {
		return fmt.Errorf("coordinator: bucket %s: %w", protocol.HealthBucket, err)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { c.watchLiveness(ctx) })
	tick := time.NewTicker(c.cfg.HealthInterval)
	defer tick.Stop()
	for {
		for _, p := range c.deps.Catalog.Providers() {
			c.publish(ctx, kv, c.probe(ctx, p))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// watchRetry is the pause before the liveness watcher starts again after
// it could not (NATS not ready).
const watchRetry = 2 * time.Second

// watchLiveness runs the liveness watcher until ctx ends.
func (c *Coordinator) watchLiveness(ctx context.Context) {
	w := protocol.Watcher{JS: c.deps.JS, Topology: c.deps.Topology, Name: c.name, Logger: c.deps.Logger}
	for {
		err := w.Run(ctx)
		if ctx.Err() != nil {
			return
		}
		c.deps.Logger.Warn("liveness watcher stopped; starting it again", "err", err, "in", watchRetry)
		select {
		case <-ctx.Done():
			return
		case <-time.After(watchRetry):
		}
	}
}

// probe asks the provider for its model list: cheap, authenticated, and
// served by every OpenAI-compatible API.
func (c *Coordinator) probe(ctx context.Context, p provider.Config) protocol.Health {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.HealthTimeout)
	defer cancel()
	h := protocol.Health{Provider: p.Name, State: protocol.HealthRed}
	start := time.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.BaseURL+"/models", nil)
	if err == nil && len(p.APIKeys) > 0 {
		req.Header.Set("Authorization", "Bearer "+p.APIKeys[0])
	}
	var resp *http.Response
	if err == nil {
		resp, err = c.deps.HTTP.Do(req)
	}
	h.LatencyMS = time.Since(start).Milliseconds()
	h.CheckedAt = time.Now().Unix()
	switch {
	case err != nil:
		h.LastError = err.Error()
	case resp.StatusCode != http.StatusOK:
		h.LastError = "GET /models: " + resp.Status
	case time.Since(start) > c.cfg.SlowThreshold:
		h.State = protocol.HealthYellow
		h.LastError = fmt.Sprintf("slow: %v", time.Since(start).Round(time.Millisecond))
	default:
		h.State = protocol.HealthGreen
	}
	if resp != nil {
		resp.Body.Close()
	}
	return h
}

func (c *Coordinator) publish(ctx context.Context, kv jetstream.KeyValue, h protocol.Health) {
	data, _ := json.Marshal(h)
	if _, err := kv.Put(ctx, h.Provider, data); err != nil && ctx.Err() == nil {
		c.deps.Logger.Warn("publish health", "provider", h.Provider, "err", err)
		return
	}
	c.deps.Logger.Debug("provider health", "provider", h.Provider, "state", h.State, "latency_ms", h.LatencyMS, "err", h.LastError)
}
