package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/coordinator"
	"github.com/relaydev/relay/relay/config"
	"github.com/relaydev/relay/relay/fleet"
	"github.com/relaydev/relay/relay/fleet/breaker"
	"github.com/relaydev/relay/relay/fleet/canary"
	"github.com/relaydev/relay/relay/mockupstream"
	"github.com/relaydev/relay/relay/relaytest"
	"github.com/relaydev/relay/relay/wire"
)

// options.Fleet: the coordinator tests run several workers wired by hand
// around the cluster gate as relay/app wires it, so that they can read each
// worker's copy of the shared state, and a coordinator wired by hand, so
// that they can hear its events and kill it.

// fleetInterval is the workers' and coordinator's quota and canary
// interval.
const fleetInterval = 100 * time.Millisecond

// fleetSystem is what options.Fleet adds to a system.
type fleetSystem struct {
	gates  []*fleet.SharedGate
	events *fleetEvents

	coordMu     sync.Mutex
	coord       *coordinator.Coordinator
	coordCancel context.CancelFunc
	coordDone   chan error
	coordConn   *nats.Conn
}

// fleetSettings are the coordinator tests' settings, before their Tune:
// fast retries, short intervals and lease, and room enough that a loaded
// machine does not look like a fault.
func fleetSettings(cfg *config.Config) {
	for i := range cfg.Providers {
		p := &cfg.Providers[i]
		p.Retry, p.FirstTokenTimeout, p.StallTimeout = fastRetry, 5*time.Second, 5*time.Second
	}
	cfg.Coordinator.HealthInterval = 500 * time.Millisecond
	cfg.Coordinator.QuotaInterval = fleetInterval
	cfg.Coordinator.CanaryInterval = fleetInterval
	cfg.Coordinator.LeaseTTL = 2 * time.Second
	cfg.Worker.MaxInflight = 100
	// The machine may be loaded (race detector, other tests): a worker
	// must not be taken for dead and its requests handed over, which
	// would look like retries.
	cfg.Worker.LivenessTimeout = 5 * time.Second
	cfg.Streams.AckWait = 30 * time.Second
}

// startFleetWorker starts worker id around a shared gate of its own.
func (s *system) startFleetWorker(g *runGroup, id string, logger *slog.Logger) {
	t := g.t
	t.Helper()
	nc, js := s.connect(g, "worker", logger)
	catalog, err := s.cfg.Catalog()
	if err != nil {
		t.Fatal(err)
	}
	wlog := logger.With("role", "worker", "worker", id)
	gate, err := fleet.NewSharedGate(g.ctx, fleet.SharedGateConfig{ID: id, QuotaInterval: fleetInterval},
		fleet.SharedGateDeps{JS: js, Catalog: catalog, Logger: wlog, Events: s.events})
	if err != nil {
		t.Fatal(err)
	}
	g.run(func() error { return gate.Run(g.ctx) })
	wcfg := s.cfg.Worker
	wcfg.ID = id
	s.wireWorker(g, nc, js, wcfg, gate, wlog)
	s.gates = append(s.gates, gate)
}

// waitGatesSynced waits until every shared gate read the shared state.
func (s *system) waitGatesSynced() {
	for _, g := range s.gates {
		select {
		case <-g.Synced():
		case <-time.After(10 * time.Second):
			s.t.Fatal("gate did not read the shared state")
		}
	}
}

// fleetEvents collects the breaker transitions every worker made and the
// coordinator's events.
type fleetEvents struct {
	mu      sync.Mutex
	breaker []breaker.Event
	coord   []coordinator.Event
}

func (e *fleetEvents) OnEvent(ev breaker.Event) {
	e.mu.Lock()
	e.breaker = append(e.breaker, ev)
	e.mu.Unlock()
}

// transitions returns the transitions to phase ("": all of them); for
// half-open, only the probe claims (not the releases of a claim).
func (e *fleetEvents) transitions(to breaker.Phase) []breaker.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []breaker.Event
	for _, ev := range e.breaker {
		if to == "" || ev.To == to && (to != breaker.HalfOpen || strings.Contains(ev.Reason, "claimed")) {
			out = append(out, ev)
		}
	}
	return out
}

func (e *fleetEvents) coordEvents(kind string) []coordinator.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []coordinator.Event
	for _, ev := range e.coord {
		if ev.Kind == kind {
			out = append(out, ev)
		}
	}
	return out
}

// startCoordinator starts a coordinator on its own connection and waits
// until it holds the lease.
func (c *system) startCoordinator() {
	c.t.Helper()
	nc, js := relaytest.Connect(c.t, c.NATS, c.cfg.Streams)
	catalog, err := c.cfg.Catalog()
	if err != nil {
		c.t.Fatal(err)
	}
	co, err := coordinator.New(c.cfg.Coordinator, coordinator.Deps{
		JS: js, Topology: c.cfg.Streams, Catalog: catalog, Logger: relaytest.Logger(c.t).With("role", "coordinator"),
		Events: func(ev coordinator.Event) {
			c.events.mu.Lock()
			c.events.coord = append(c.events.coord, ev)
			c.events.mu.Unlock()
		},
	})
	if err != nil {
		c.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- co.Run(ctx) }()
	c.coordMu.Lock()
	c.coord, c.coordCancel, c.coordDone, c.coordConn = co, cancel, done, nc
	c.coordMu.Unlock()
	relaytest.Eventually(c.t, 10*time.Second, 20*time.Millisecond, co.Active)
}

// killCoordinator stops the coordinator as a kill would: its connection
// goes first, so it neither releases its lease nor writes anything more.
func (c *system) killCoordinator() {
	c.coordMu.Lock()
	nc := c.coordConn
	c.coordMu.Unlock()
	nc.Close()
	c.stopCoordinator()
}

// stopCoordinator stops the coordinator, if one runs.
func (c *system) stopCoordinator() {
	c.coordMu.Lock()
	cancel, done := c.coordCancel, c.coordDone
	c.coordCancel, c.coordDone = nil, nil
	c.coordMu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	if err := <-done; err != nil {
		c.t.Errorf("coordinator stopped with: %v", err)
	}
}

// kv opens a shared bucket.
func (c *system) kv(bucket string) jetstream.KeyValue {
	c.t.Helper()
	_, js := relaytest.Connect(c.t, c.NATS, c.cfg.Streams)
	kv, err := js.KeyValue(context.Background(), bucket)
	if err != nil {
		c.t.Fatal(err)
	}
	return kv
}

// phaseAt is one breaker phase, as a watcher saw it.
type phaseAt struct {
	at    time.Time
	state breaker.State
}

// breakerLog follows a breaker's phases through a watch of its own.
type breakerLog struct {
	mu     sync.Mutex
	phases []phaseAt
}

// mockOne is the scope of mock-1 on provider mock: its breaker, pause and
// retry budget.
var mockOne = wire.ScopeKey("mock", "mock-1")

// watchBreaker follows the breaker of mock-1, the model the tests call,
// on provider.
func (c *system) watchBreaker(provider string) *breakerLog {
	c.t.Helper()
	l := &breakerLog{}
	tab := fleet.NewTable[breaker.State](c.kv(wire.BreakerBucket), nil, wire.ScopeKey(provider, "mock-1"))
	tab.OnChange = func(_ string, row fleet.Row[breaker.State], ok bool) {
		l.mu.Lock()
		l.phases = append(l.phases, phaseAt{at: time.Now(), state: row.Value})
		l.mu.Unlock()
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.t.Cleanup(cancel)
	go tab.Run(ctx)
	<-tab.Synced()
	return l
}

// waitFor waits until the breaker is in phase, and returns the first such
// state seen after since: at is when this test's watch brought it, which
// lags the transition by the write and the watch (more on a loaded
// machine); the state's own Since and Until are the breaker's times, the
// ones to compare with its cooldown.
func (l *breakerLog) waitFor(t *testing.T, phase breaker.Phase, since time.Time, within time.Duration) phaseAt {
	t.Helper()
	var found phaseAt
	relaytest.Eventually(t, within, 5*time.Millisecond, func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		for _, p := range l.phases {
			if p.at.After(since) && p.state.Current() == phase {
				found = p
				return true
			}
		}
		return false
	})
	return found
}

// seen reports whether the breaker was in phase after since.
func (l *breakerLog) seen(phase breaker.Phase, since time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, p := range l.phases {
		if p.at.After(since) && p.state.Current() == phase {
			return true
		}
	}
	return false
}

// learnedOpen waits until every worker's copy of the breaker at scope is
// open (or already probing), and returns when: from a little after that
// moment, a call that reaches the provider is a probe (the calls admitted
// before may still be on their way).
func (c *system) learnedOpen(scope string) time.Time {
	c.t.Helper()
	relaytest.Eventually(c.t, 5*time.Second, time.Millisecond, func() bool {
		for _, g := range c.gates {
			if g.Breaker(scope).Current() == breaker.Closed {
				return false
			}
		}
		return true
	})
	return time.Now()
}

// unary posts a "stream": false request and returns the status, the
// Retry-After header and the body.
func unary(ctx context.Context, edge, model, content string) (int, string, []byte, error) {
	return unaryWith(ctx, edge, model, content, nil)
}

// unaryWith is unary with the request headers header besides.
func unaryWith(ctx context.Context, edge, model, content string, header http.Header) (int, string, []byte, error) {
	body, _ := json.Marshal(map[string]any{
		"model": model, "stream": false,
		"messages": []mockupstream.Message{{Role: "user", Content: content}},
	})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, edge+"/v1/chat/completions", bytes.NewReader(body))
	if err != nil {
		return 0, "", nil, err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := httpClient.Do(req)
	if err != nil {
		return 0, "", nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Retry-After"), b, err
}

// usageOf is the usage of a chat.completion body.
func usageOf(body []byte) wire.Usage {
	var v struct {
		Usage wire.Usage `json:"usage"`
	}
	_ = json.Unmarshal(body, &v)
	return v.Usage
}

// canaryAt is one state of a canary ramp, as a watcher saw it.
type canaryAt struct {
	at    time.Time
	state canary.State
}

// watchCanary follows a model's canary ramp.
func (c *system) watchCanary(model string) func() []canaryAt {
	c.t.Helper()
	var mu sync.Mutex
	var states []canaryAt
	tab := fleet.NewTable[canary.State](c.kv(wire.CanaryBucket), nil, wire.KeyToken(model))
	tab.OnChange = func(_ string, row fleet.Row[canary.State], ok bool) {
		if ok {
			mu.Lock()
			states = append(states, canaryAt{at: time.Now(), state: row.Value})
			mu.Unlock()
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.t.Cleanup(cancel)
	go tab.Run(ctx)
	<-tab.Synced()
	return func() []canaryAt {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(states)
	}
}

// spreadOf describes arrival offsets from an anchor: the 10th and 90th
// percentiles, and the largest share of them in one tenth of window (the
// ones after the window, late by scheduling, count in no tenth).
func spreadOf(offsets []time.Duration, window time.Duration) (p10, p90 time.Duration, maxBin float64) {
	if len(offsets) == 0 {
		return 0, 0, 0
	}
	sorted := slices.Clone(offsets)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
	p10, p90 = sorted[len(sorted)/10], sorted[len(sorted)*9/10]
	var bins [10]int
	for _, d := range sorted {
		if i := int(10 * d / window); i < 10 {
			bins[max(i, 0)]++
		}
	}
	return p10, p90, float64(slices.Max(bins[:])) / float64(len(sorted))
}

func stringsReader(s string) io.Reader { return bytes.NewReader([]byte(s)) }
