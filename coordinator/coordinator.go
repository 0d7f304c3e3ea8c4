// Package coordinator is the role that keeps cluster-wide provider state in
// JetStream KV (package fleet). Every coordinator watches the workers'
// heartbeats and hands a dead worker's requests to another worker at once
// (package liveness). One of them, the holder of a KV lease, is active and
// also
//
//   - probes every provider and publishes its health (health.go; the
//     probe call, with the workers' keys, is prober.go),
//   - probes a breaker whose cooldown ended while no worker had a request
//     to probe it with (probe.go),
//   - splits the shared rate limits into per-node shares (quota.go), and
//     publishes the fleet's first-token times for hedging (ttft.go),
//   - drives the canary ramps (canary.go),
//   - evens out the chunk streams' leaders over the servers (leaders.go).
//
// Workers never wait for a coordinator: with none running, requests still
// flow, breakers still trip and recover (the workers make every transition
// themselves, and probe with real requests), quota shares keep their last
// value and ramps hold their step. Several coordinators may run; a standby
// takes over within coordinator.lease_ttl of the active one's death, at
// once after a graceful stop.
package coordinator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/relay/backoff"
	"github.com/relaydev/relay/relay/fleet"
	"github.com/relaydev/relay/relay/fleet/breaker"
	"github.com/relaydev/relay/relay/liveness"
	"github.com/relaydev/relay/relay/provider"
	"github.com/relaydev/relay/relay/streams"
	"github.com/relaydev/relay/relay/upstream"
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
	// FailureWindow marks a provider yellow while a worker's call failed
	// within it (zero: 1m).
	FailureWindow time.Duration `koanf:"failure_window"`
	// Listen is host:port of the coordinator's /healthz and /readyz (zero:
	// 127.0.0.1:8082). Used by main.
	Listen string `koanf:"listen"`
	// LeaseTTL is how long the active coordinator's lease outlives it:
	// a standby takes over that long after the active one died (at once
	// after a graceful stop). Zero: 10s; at least 1s.
	LeaseTTL time.Duration `koanf:"lease_ttl"`
	// QuotaInterval is how often the active coordinator splits the shared
	// limits into shares by the nodes' demand (zero: 1s).
	QuotaInterval time.Duration `koanf:"quota_interval"`
	// CanaryInterval is how often it moves the canary ramps (zero: 1s).
	CanaryInterval time.Duration `koanf:"canary_interval"`
	// ProbeGrace is how long a breaker may stay open after its cooldown
	// ended without a worker claiming its probe before the coordinator
	// probes the provider itself (with the provider's probe call). Zero:
	// 1s; negative: never.
	ProbeGrace time.Duration `koanf:"probe_grace"`
	// TenantRPM is every tenant's requests per minute over all edges,
	// unless TenantLimits names it. Zero: no limit.
	TenantRPM int `koanf:"tenant_rpm"`
	// TenantLimits are per-tenant requests per minute, by tenant.
	TenantLimits map[string]int `koanf:"tenant_limits"`
	// TenantTPM is every tenant's tokens per minute over all edges (the
	// usage of its generations), unless TenantTPMLimits names it. Zero:
	// no limit.
	TenantTPM       int            `koanf:"tenant_tpm"`
	TenantTPMLimits map[string]int `koanf:"tenant_tpm_limits"`
	// TenantMaxConcurrent caps every tenant's generations at once over the
	// whole fleet, unless TenantConcurrency names it; a request over the
	// cap waits at its edge for one of the tenant's own to end. Zero: no
	// cap (the edges still share the workers' slots fairly between
	// tenants: edge/admit_tenant_gate.go).
	TenantMaxConcurrent int            `koanf:"tenant_max_concurrent"`
	TenantConcurrency   map[string]int `koanf:"tenant_concurrency"`
}

// Defaults.
const (
	DefaultHealthInterval = 30 * time.Second
	DefaultLeaseTTL       = 10 * time.Second
	DefaultQuotaInterval  = time.Second
	DefaultCanaryInterval = time.Second
	DefaultProbeGrace     = time.Second
	DefaultFailureWindow  = time.Minute
	// DefaultListen is the address of /healthz, /readyz and /metrics.
	DefaultListen = "127.0.0.1:8082"
)

func (c Config) withDefaults() Config {
	if c.HealthInterval == 0 {
		c.HealthInterval = DefaultHealthInterval
	}
	if c.HealthTimeout == 0 {
		c.HealthTimeout = 5 * time.Second
	}
	if c.SlowThreshold == 0 {
		c.SlowThreshold = 2 * time.Second
	}
	if c.FailureWindow == 0 {
		c.FailureWindow = DefaultFailureWindow
	}
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	if c.LeaseTTL == 0 {
		c.LeaseTTL = DefaultLeaseTTL
	}
	if c.QuotaInterval == 0 {
		c.QuotaInterval = DefaultQuotaInterval
	}
	if c.CanaryInterval == 0 {
		c.CanaryInterval = DefaultCanaryInterval
	}
	if c.ProbeGrace == 0 {
		c.ProbeGrace = DefaultProbeGrace
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
	case c.FailureWindow < 0:
		return fmt.Errorf("%s.failure_window: must not be negative", prefix)
	case c.LeaseTTL < 0 || (c.LeaseTTL > 0 && c.LeaseTTL < time.Second):
		return fmt.Errorf("%s.lease_ttl: %v is below 1s", prefix, c.LeaseTTL)
	case c.QuotaInterval < 0 || (c.QuotaInterval > 0 && c.QuotaInterval < 10*time.Millisecond):
		return fmt.Errorf("%s.quota_interval: %v is below 10ms", prefix, c.QuotaInterval)
	case c.CanaryInterval < 0 || (c.CanaryInterval > 0 && c.CanaryInterval < 10*time.Millisecond):
		return fmt.Errorf("%s.canary_interval: %v is below 10ms", prefix, c.CanaryInterval)
	case c.TenantRPM < 0:
		return fmt.Errorf("%s.tenant_rpm: must not be negative (0: no limit)", prefix)
	case c.TenantTPM < 0:
		return fmt.Errorf("%s.tenant_tpm: must not be negative (0: no limit)", prefix)
	case c.TenantMaxConcurrent < 0:
		return fmt.Errorf("%s.tenant_max_concurrent: must not be negative (0: no cap)", prefix)
	}
	for name, limits := range map[string]map[string]int{
		"tenant_limits": c.TenantLimits, "tenant_tpm_limits": c.TenantTPMLimits, "tenant_concurrency": c.TenantConcurrency,
	} {
		for tenant, n := range limits {
			if n < 0 {
				return fmt.Errorf("%s.%s.%s: must not be negative", prefix, name, tenant)
			}
		}
	}
	return nil
}

// Deps are the coordinator's connections.
type Deps struct {
	// JS is JetStream on the coordinator's connection, which also carries
	// the workers' heartbeats unless LivenessNC is set; in a region that is
	// not the home, the region's view (shared buckets read locally, written
	// to the home). Required.
	JS jetstream.JetStream
	// LivenessNC receives the workers' heartbeats: a connection of its
	// own, so that a busy JS connection cannot delay them (package
	// liveness). Nil: JS's connection.
	LivenessNC *nats.Conn
	// Topology sizes the handover bucket if the coordinator creates it.
	Topology streams.Topology
	Catalog  *provider.Catalog
	// HTTP calls the providers (zero: a client with upstream's Transport,
	// so that a probe takes the protocol the workers' calls take).
	HTTP   *http.Client
	Logger *slog.Logger
	// Name identifies the coordinator in its lease and records (zero:
	// coordinator@<host>-<pid>-<random>).
	Name string
	// Events receives the transitions the coordinator makes (probes,
	// ramps), after they are logged; nil for none.
	Events func(Event)
	// Breakers receives the breaker transitions the coordinator makes
	// (the claims and verdicts of its probes of idle breakers), to count
	// them as the workers count theirs; nil for none.
	Breakers breaker.EventHandler
}

// Event is a transition the active coordinator made, for logs and tests.
type Event struct {
	At   time.Time
	Kind string // "lease", "probe", "canary", "leaders"
	Text string
}

// Coordinator probes providers, publishes their health, hands the requests
// of silent workers over and, while it holds the lease, drives the shared
// state.
type Coordinator struct {
	cfg  Config
	deps Deps
	name string
	keys keyRings // the providers' API keys, for the probes

	mu     sync.Mutex
	active bool
}

// New validates cfg and returns a coordinator.
func New(cfg Config, deps Deps) (*Coordinator, error) {
	if err := cfg.Validate("coordinator"); err != nil {
		return nil, err
	}
	if deps.JS == nil {
		return nil, errors.New("coordinator: Deps.JS is required")
	}
	if deps.Catalog == nil {
		return nil, errors.New("coordinator: Deps.Catalog is required")
	}
	if deps.HTTP == nil {
		deps.HTTP = &http.Client{Transport: upstream.NewTransport(0)}
	}
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.DiscardHandler)
	}
	name := deps.Name
	if name == "" {
		host, _ := os.Hostname()
		name = fmt.Sprintf("coordinator@%s-%d-%s", host, os.Getpid(), randomID())
	}
	return &Coordinator{cfg: cfg.withDefaults(), deps: deps, name: name, keys: keyRings{logger: deps.Logger}}, nil
}

// ListenAddr is the configured ops address, with its default applied.
func (c *Coordinator) ListenAddr() string { return c.cfg.Listen }

// Name is the name the coordinator holds its lease by.
func (c *Coordinator) Name() string { return c.name }

// Active reports whether this coordinator holds the lease now.
func (c *Coordinator) Active() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.active
}

func (c *Coordinator) setActive(v bool) {
	c.mu.Lock()
	c.active = v
	c.mu.Unlock()
}

// event logs and forwards a transition.
func (c *Coordinator) event(kind, text string, level slog.Level) {
	c.deps.Logger.Log(context.Background(), level, kind+" event", "event", text)
	if c.deps.Events != nil {
		c.deps.Events(Event{At: time.Now(), Kind: kind, Text: text})
	}
}

// Run watches the workers' liveness and competes for the lease until ctx
// ends; while it holds the lease it drives the shared state. It returns
// an error only if the shared buckets are missing (streams.Setup did not
// run).
func (c *Coordinator) Run(ctx context.Context) error {
	lease, s, err := c.start(ctx)
	switch {
	case err != nil && ctx.Err() != nil:
		// Stopped while starting: a stop, as after starting, not a failure.
		return nil
	case err != nil:
		return fmt.Errorf("coordinator: %w", err)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { c.watchLiveness(ctx) })
	return lease.Run(ctx, func(ctx context.Context) {
		c.setActive(true)
		c.event("lease", c.name+" is the active coordinator", slog.LevelInfo)
		defer func() {
			c.setActive(false)
			c.event("lease", c.name+" is no longer active", slog.LevelInfo)
		}()
		c.drive(ctx, s)
	})
}

// start gets the coordinator's lease and opens the shared state.
func (c *Coordinator) start(ctx context.Context) (fleet.Lease, *state, error) {
	lease, err := fleet.CoordinatorLease(ctx, c.deps.JS, c.name, c.cfg.LeaseTTL, c.deps.Logger)
	if err != nil {
		return fleet.Lease{}, nil, err
	}
	s, err := c.openState(ctx)
	return lease, s, err
}

// watchRetry spaces the starts of the liveness watcher after it could not
// start (NATS not ready).
var watchRetry = backoff.Backoff{Config: backoff.Config{Base: time.Second, Cap: 4 * time.Second}}

// watchLiveness runs the liveness watcher until ctx ends.
func (c *Coordinator) watchLiveness(ctx context.Context) {
	w := liveness.Watcher{JS: c.deps.JS, NC: c.deps.LivenessNC, Topology: c.deps.Topology, Name: c.name, Logger: c.deps.Logger}
	rewatch(ctx, watchRetry, c.deps.Logger, w.Run)
}

// rewatch runs watch until ctx ends, starting it again after a backoff
// whenever it returns before: a liveness watcher returns only when it
// could not start, so every return counts as one more failure.
func rewatch(ctx context.Context, b backoff.Backoff, log *slog.Logger, watch func(context.Context) error) {
	b.Rerun(ctx, func(ctx context.Context) (bool, error) { return false, watch(ctx) }, func(err error, d time.Duration) {
		log.Warn("liveness watcher stopped; starting it again", "err", err, "in", d)
	})
}

// drive runs the active coordinator's duties until ctx ends.
func (c *Coordinator) drive(ctx context.Context, s *state) {
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wg.Go(func() { _ = s.Run(ctx) })
	wg.Go(func() { c.runHealth(ctx, s) })
	wg.Go(func() { c.runProbes(ctx, s) })
	wg.Go(func() { c.runQuotas(ctx, s) })
	wg.Go(func() { c.runCanaries(ctx, s) })
	wg.Go(func() { c.runLeaders(ctx) })
	<-ctx.Done()
}
