package fleet

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/relay/fleet/breaker"
	"github.com/relaydev/relay/relay/fleet/canary"
	"github.com/relaydev/relay/relay/fleet/quota"
	"github.com/relaydev/relay/relay/provider"
	"github.com/relaydev/relay/relay/wire"
)

// View is one node's local copy of the shared provider state: the tables
// it follows through watches, over the buckets of wire.SharedStateBuckets.
// Each role opens the buckets it reads; the fields of the others are nil.
// Reads are local; writes are revision-checked updates, on transitions.
type View struct {
	Breakers *Table[breaker.State]
	Pauses   *Table[wire.Pause]
	Canaries *Table[canary.State]
	// Demand is the nodes' demand reports, a table of the quota bucket's
	// DemandPrefix keys; nil unless FollowDemand was called.
	Demand *Table[quota.Report]
	// Quotas and Health are written by key (shares, limits, provider
	// health), not followed.
	Quotas jetstream.KeyValue
	Health jetstream.KeyValue

	log *slog.Logger
}

// OpenView opens buckets (names from wire.SharedStateBuckets) in js. The
// tables stay empty until Run.
func OpenView(ctx context.Context, js jetstream.JetStream, logger *slog.Logger, buckets ...string) (*View, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	v := &View{log: logger}
	for _, name := range buckets {
		kv, err := js.KeyValue(ctx, name)
		if err != nil {
			return nil, fmt.Errorf("fleet: bucket %s: %w", name, err)
		}
		switch name {
		case wire.BreakerBucket:
			v.Breakers = NewTable[breaker.State](kv, logger)
		case wire.PauseBucket:
			v.Pauses = NewTable[wire.Pause](kv, logger)
		case wire.CanaryBucket:
			v.Canaries = NewTable[canary.State](kv, logger)
		case wire.QuotaBucket:
			v.Quotas = kv
		case wire.HealthBucket:
			v.Health = kv
		default:
			return nil, fmt.Errorf("fleet: bucket %s is not shared provider state", name)
		}
	}
	return v, nil
}

// FollowDemand adds the table of the nodes' demand reports (the quota
// bucket must be open), calling onChange for each change it brings; call
// it before Run.
func (v *View) FollowDemand(onChange func(key string, row Row[quota.Report], ok bool)) {
	v.Demand = NewTable[quota.Report](v.Quotas, v.log, DemandPrefix+">")
	v.Demand.OnChange = onChange
}

// Run follows every open table until ctx ends.
func (v *View) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	for _, run := range v.runs() {
		wg.Go(func() { _ = run(ctx) })
	}
	wg.Wait()
	return nil
}

func (v *View) runs() []func(context.Context) error {
	var runs []func(context.Context) error
	if v.Breakers != nil {
		runs = append(runs, v.Breakers.Run)
	}
	if v.Pauses != nil {
		runs = append(runs, v.Pauses.Run)
	}
	if v.Canaries != nil {
		runs = append(runs, v.Canaries.Run)
	}
	if v.Demand != nil {
		runs = append(runs, v.Demand.Run)
	}
	return runs
}

// Transition moves breaker key by f, a pure transition of the breaker
// package (Trip, Claim, Resolve…), with a revision-checked update retried
// on a conflict. It reports the transition and whether this call wrote
// it; f's ok false leaves the breaker as it is.
func (v *View) Transition(ctx context.Context, key string, f func(cur breaker.State) (breaker.State, breaker.Event, bool)) (breaker.Event, bool, error) {
	var ev breaker.Event
	_, written, err := v.Breakers.Update(ctx, key, func(cur breaker.State, _ bool) (breaker.State, error) {
		next, e, ok := f(cur)
		if !ok {
			return cur, ErrNoChange
		}
		ev = e
		return next, nil
	})
	return ev, written, err
}

// ScopeOf is the breaker, pause and retry budget key of model on p: the
// model's on it, or the provider's when its breaker's scope is the
// provider.
func ScopeOf(p provider.Config, model string) string {
	if p.Breaker.PerModel() {
		return wire.ScopeKey(p.Name, model)
	}
	return wire.ScopeKey(p.Name, "")
}

// AllOpen reports whether every candidate of a route is refused now by an
// open breaker (not yet claimable), and the shortest wait. The breakers
// must be open in v. Shared pauses are left to the workers: they are
// short, and a worker's refusal carries the same Retry-After.
func (v *View) AllOpen(route []provider.Candidate, now time.Time) (time.Duration, bool) {
	if len(route) == 0 {
		return 0, false
	}
	wait := time.Duration(-1)
	for _, cand := range route {
		w := time.Duration(0)
		if cfg := cand.Provider.Breaker; cfg.Enabled() {
			row, _ := v.Breakers.Get(ScopeOf(cand.Provider, cand.Model))
			if d, bw := breaker.Decide(row.Value, now); d == breaker.Wait {
				w = breaker.Hint(row.Value, cfg, bw)
			}
		}
		if w <= 0 {
			return 0, false
		}
		if wait < 0 || w < wait {
			wait = w
		}
	}
	return wait, true
}
