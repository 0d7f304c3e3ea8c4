package fleet

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	mrand "math/rand/v2"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/relay/fleet/breaker"
	"github.com/relaydev/relay/relay/fleet/canary"
	"github.com/relaydev/relay/relay/fleet/quota"
	"github.com/relaydev/relay/relay/provider"
	"github.com/relaydev/relay/relay/wire"
)

// SharedGate is the Gate of a worker in a cluster: circuit breakers, shared
// Retry-After pauses, retry budgets, provider rate limits and canary
// routing, with their state shared through KV (wire.SharedStateBuckets).
//
// The hot path makes no round trip: Admit consults the local copies of the
// breakers, pauses and canaries (fed by watches) and the worker's own
// quota shares and retry budgets. KV is written only on a transition: a
// breaker tripped (this worker's breaker.Tally saw an outage), a
// probe claimed or resolved, a pause raised. With no coordinator running,
// all of it still works: the workers make every breaker transition
// themselves.
//
// Admit may wait: a pause or a short outage is a queue, not a failure. A
// call with no other candidate waits, up to breaker.max_wait, for an open
// breaker's probe or a pause to end, and is then let go in its slot of the
// recovery window after the moment it ended, which every worker shares, so
// the fleet's calls spread (full jitter, cluster-wide) in the order they
// came (waitline.go); a call over a rate limit waits up to
// rate_limit.max_wait. A call that could not outwait the bound, or the
// first call of a request that asked to fail fast (CallInfo.FailFast), is
// refused at once, with a Retry-After.
type SharedGate struct {
	id      string
	catalog *provider.Catalog
	log     *slog.Logger
	events  breaker.EventHandler
	draw    func(n int64) int64

	// view holds the breakers, pauses and canaries.
	view   *View
	quotas *QuotaNode

	mu      sync.Mutex
	scopes  map[string]*scopeState
	budgets map[string]*quota.Budget
	// budgeted counts, by scope, the requests and retries the budgets
	// admitted since the gate started (the budgets only know their window).
	budgeted map[string]*quota.Retries
	denied   map[string]int
	calls    map[string]*quota.Calls
	counts   map[string]int // transitions made, "from->to"
	// keys returns the checks of the worker's API keys (ReportKeys).
	keys func() map[string][]quota.APIKey
	// ttft holds the worker's first-token times and the fleet's figures.
	ttft *ttftFigures
}

type scopeState struct {
	tally    breaker.Tally
	claiming bool
	line     waitLine
}

// SharedGateConfig configures a SharedGate.
type SharedGateConfig struct {
	// ID names the worker in breaker transitions and quota reports
	// (zero: a random name).
	ID string
	// QuotaInterval is how often the worker reports its demand and picks
	// up its quota shares (zero: 1s).
	QuotaInterval time.Duration
}

// SharedGateDeps are a SharedGate's collaborators.
type SharedGateDeps struct {
	// JS opens the shared buckets; in a region that is not the home, its
	// view of them (reads local, writes to the home). Required.
	JS jetstream.JetStream
	// Catalog holds the providers' breaker, rate limit, retry budget and
	// canary settings. Required.
	Catalog *provider.Catalog
	Logger  *slog.Logger
	// Events receives every transition this worker makes, after the gate
	// logged and counted it; nil for none.
	Events breaker.EventHandler
	// Rand draws the recovery jitter, uniform in [0, n); nil for
	// math/rand/v2.
	Rand func(n int64) int64
}

// NewSharedGate opens the shared buckets and returns a gate; Run must run
// for it to follow the shared state.
func NewSharedGate(ctx context.Context, cfg SharedGateConfig, deps SharedGateDeps) (*SharedGate, error) {
	if deps.JS == nil || deps.Catalog == nil {
		return nil, errors.New("fleet: SharedGateDeps.JS and Catalog are required")
	}
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.DiscardHandler)
	}
	if deps.Rand == nil {
		deps.Rand = mrand.Int64N
	}
	if cfg.ID == "" {
		cfg.ID = "worker-" + randomID()
	}
	log := deps.Logger.With("gate", cfg.ID)
	view, err := OpenView(ctx, deps.JS, log, wire.BreakerBucket, wire.PauseBucket, wire.CanaryBucket, wire.QuotaBucket)
	if err != nil {
		return nil, err
	}
	g := &SharedGate{
		id: cfg.ID, catalog: deps.Catalog, log: log, events: deps.Events, draw: deps.Rand,
		view:     view,
		scopes:   map[string]*scopeState{},
		budgets:  map[string]*quota.Budget{},
		budgeted: map[string]*quota.Retries{},
		denied:   map[string]int{},
		calls:    map[string]*quota.Calls{},
		counts:   map[string]int{},
		ttft:     newTTFTFigures(),
	}
	g.quotas = &QuotaNode{KV: view.Quotas, ID: cfg.ID, Role: "worker", Interval: cfg.QuotaInterval, Logger: log, Extra: g.addToReport}
	for _, p := range deps.Catalog.Providers() {
		tok := wire.KeyToken(p.Name)
		if p.RateLimit.RPM > 0 {
			g.quotas.Declare(quota.ProviderRPM(tok), float64(p.RateLimit.RPM), p.RateLimit, false)
		}
		if p.RateLimit.TPM > 0 {
			g.quotas.Declare(quota.ProviderTPM(tok), float64(p.RateLimit.TPM), p.RateLimit, true)
		}
	}
	return g, nil
}

// budgetOf is the retry budget of scope (ScopeOf) on p, made at its first
// call. g.mu must be held.
func (g *SharedGate) budgetOf(p provider.Config, scope string) *quota.Budget {
	b := g.budgets[scope]
	if b == nil {
		b = quota.NewBudget(p.RetryBudget)
		g.budgets[scope] = b
	}
	return b
}

func randomID() string {
	var b [6]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Run follows the shared state and reports the worker's demand until ctx
// ends.
func (g *SharedGate) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Go(func() { _ = g.quotas.Run(ctx) })
	wg.Go(func() { g.ttft.follow(ctx, g.view.Quotas, cmp.Or(g.quotas.Interval, DefaultQuotaInterval)) })
	_ = g.view.Run(ctx)
	wg.Wait()
	return nil
}

// Synced is closed once the gate has read the breakers, pauses and
// canaries.
func (g *SharedGate) Synced() <-chan struct{} {
	done := make(chan struct{})
	go func() {
		<-g.view.Breakers.Synced()
		<-g.view.Pauses.Synced()
		<-g.view.Canaries.Synced()
		close(done)
	}()
	return done
}

// Breaker returns the local copy of a breaker, by scope key.
func (g *SharedGate) Breaker(scope string) breaker.State {
	row, _ := g.view.Breakers.Get(scope)
	return row.Value
}

// Pause returns the local copy of a shared pause, by scope key.
func (g *SharedGate) Pause(scope string) (wire.Pause, bool) {
	row, ok := g.view.Pauses.Get(scope)
	return row.Value, ok
}

// Canary returns the local copy of a model's canary ramp.
func (g *SharedGate) Canary(model string) (canary.State, bool) {
	row, ok := g.view.Canaries.Get(wire.KeyToken(model))
	return row.Value, ok
}

// GateStats are what one SharedGate did, for tests and status.
type GateStats struct {
	// Transitions this worker made, by "from->to".
	Transitions map[string]int
	// Refused calls, by cause ("open", "paused", "budget", "quota").
	Refused map[string]int
	// Calls by "<provider>/<model>".
	Calls map[string]quota.Calls
	// Retries are what the retry budgets admitted and refused since the
	// gate started, by scope (ScopeOf). A request handed over from another
	// worker counts as a request here: its first call on this worker.
	Retries map[string]quota.Retries
}

// Stats returns a copy of the gate's counters.
func (g *SharedGate) Stats() GateStats {
	g.mu.Lock()
	defer g.mu.Unlock()
	s := GateStats{Transitions: map[string]int{}, Refused: map[string]int{}, Calls: map[string]quota.Calls{}, Retries: map[string]quota.Retries{}}
	for p, r := range g.budgeted {
		s.Retries[p] = quota.Retries{Requests: r.Requests, Retries: r.Retries, Denied: g.denied["budget:"+p]}
	}
	for k, v := range g.counts {
		s.Transitions[k] = v
	}
	for k, v := range g.denied {
		s.Refused[k] = v
	}
	for k, v := range g.calls {
		s.Calls[k] = *v
	}
	return s
}

func (g *SharedGate) scope(key string) *scopeState {
	s := g.scopes[key]
	if s == nil {
		s = &scopeState{}
		g.scopes[key] = s
	}
	return s
}

// emit logs and counts a transition this worker made.
func (g *SharedGate) emit(ev breaker.Event) {
	g.mu.Lock()
	g.counts[string(ev.From)+"->"+string(ev.To)]++
	g.mu.Unlock()
	level := slog.LevelInfo
	if ev.To == breaker.Open {
		level = slog.LevelWarn
	}
	g.log.Log(context.Background(), level, "breaker transition", "scope", ev.Key, "from", ev.From, "to", ev.To,
		"reason", ev.Reason, "cooldown", ev.Cooldown)
	if g.events != nil {
		g.events.OnEvent(ev)
	}
}

// transition writes a breaker transition computed by f from the current
// state, and emits it if this worker's write made it.
func (g *SharedGate) transition(key string, f func(cur breaker.State) (breaker.State, breaker.Event, bool)) bool {
	ctx, cancel := context.WithTimeout(context.Background(), stateWriteTimeout)
	defer cancel()
	ev, written, err := g.view.Transition(ctx, key, f)
	if err != nil {
		g.log.Warn("breaker transition not written", "scope", key, "err", err)
		return false
	}
	if written {
		g.emit(ev)
	}
	return written
}

// stateWriteTimeout bounds one write of shared state.
const stateWriteTimeout = 5 * time.Second

// ReportKeys has the gate add what keys returns, the checks of the
// worker's provider API keys, to its quota reports, which GET
// /v1/relay/status reads. The worker calls it once, before the gate runs.
func (g *SharedGate) ReportKeys(keys func() map[string][]quota.APIKey) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.keys = keys
}

// addToReport adds the worker's call counts, retry budgets, key checks
// and recent first-token times to its quota report.
func (g *SharedGate) addToReport(r *quota.Report) {
	now := time.Now()
	g.mu.Lock()
	keys := g.keys
	g.mu.Unlock()
	if keys != nil {
		r.Keys = keys()
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	r.Calls = map[string]quota.Calls{}
	for k, c := range g.calls {
		r.Calls[k] = *c
	}
	r.Retries = map[string]quota.Retries{}
	for p, b := range g.budgets {
		q, n := b.Counts(now)
		r.Retries[p] = quota.Retries{Requests: q, Retries: n, Denied: g.denied["budget:"+p]}
	}
	g.ttft.addToReport(r, now)
}
