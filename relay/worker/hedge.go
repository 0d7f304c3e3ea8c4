package worker

import (
	"context"
	"sync"
	"time"

	"github.com/relaydev/relay/relay/fleet"
	"github.com/relaydev/relay/relay/fleet/quota"
	"github.com/relaydev/relay/relay/provider"
)

// Hedging: a call that has produced no token when its model's
// first_token_sla passes is joined by a call of the next open candidate of
// the route (another provider, or the fallback model), and the first of
// the two to produce a token answers (hedge_race.go). What decides whether
// and when a call is hedged lives here: the plan the attempt loop hands
// the call (withHedge), the delay, adaptive with the fleet's first-token
// figures, and each worker's hedge budget.

// hedgeKey carries a call's hedgePlan in its context.
type hedgeKey struct{}

// hedgePlan is what a call may hedge with: the next open candidate of the
// route, and the CallInfo the gate is asked with for it, after delay.
type hedgePlan struct {
	cfg   provider.Hedge
	c     *provider.Candidate // the route's: read, never written
	info  fleet.CallInfo
	delay time.Duration
}

// withHedge returns ctx carrying the hedge plan of a call of candidate i,
// if the request's model hedges, a delay is known for i, and the route
// has an open candidate after i. The hedge is a fail-fast call for the gate: a breaker that is open, a
// pause or a spent quota refuses it at once instead of making it wait, and
// the call it would have joined goes on alone.
func (j *job) withHedge(ctx context.Context, s *routeState, i int, takeover bool) context.Context {
	cfg := j.w.catalog.Hedge(j.req.Model)
	if !cfg.On() {
		return ctx
	}
	for k := i + 1; k < len(s.route); k++ {
		if !s.open(k) {
			continue
		}
		delay, ok := j.w.hedgeDelay(cfg, &s.route[i])
		if !ok {
			return ctx
		}
		info := j.callInfo(s, k, takeover)
		info.FailFast = true
		return context.WithValue(ctx, hedgeKey{}, hedgePlan{cfg: cfg, c: &s.route[k], info: info, delay: delay})
	}
	return ctx
}

// hedgePlanOf returns the hedge plan in ctx, if any.
func hedgePlanOf(ctx context.Context) (hedgePlan, bool) {
	p, ok := ctx.Value(hedgeKey{}).(hedgePlan)
	return p, ok
}

// TTFTFigures is implemented by a Gate that knows the fleet's first-token
// times (fleet.SharedGate): a quantile q of those of model on provider,
// and false while it has none.
type TTFTFigures interface {
	TTFTQuantile(provider, model string, q float64) (time.Duration, bool)
}

// hedgeDelay is how long a call of c waits for its first token before it
// is hedged: cfg's scale of the quantile it asks for of c's figures, at
// least its floor, or the fixed first_token_sla when it asks for none or
// the gate has no figures; false when there is neither.
func (w *Worker) hedgeDelay(cfg provider.Hedge, c *provider.Candidate) (time.Duration, bool) {
	if cfg.Quantile == 0 {
		return cfg.SLA, true
	}
	if f, ok := figuresOf(w.gate); ok {
		if d, ok := f.TTFTQuantile(c.Provider.Name, c.Model, cfg.Quantile); ok {
			return max(time.Duration(float64(d)*cfg.Scale), cfg.Floor), true
		}
	}
	return cfg.SLA, cfg.SLA > 0
}

// figuresOf finds the TTFTFigures behind a gate, through the worker's
// metering wrapper.
func figuresOf(g Gate) (TTFTFigures, bool) {
	if m, ok := g.(meteredGate); ok {
		g = m.Gate
	}
	f, ok := g.(TTFTFigures)
	return f, ok
}

// hedgeReserve is how many hedges a worker may make per budget window
// whatever the ratio: one, so that a quiet worker can hedge at all, where
// a ratio of 0.1 alone would wait for ten calls.
const hedgeReserve = 1

// hedgeBudgets caps a worker's hedges per model at a share of its hedged
// model's calls, as quota.Budget caps retries: a provider that is slow for
// everyone is not sent every request twice. Safe for concurrent use.
type hedgeBudgets struct {
	mu      sync.Mutex
	byModel map[string]*quota.Budget
}

func newHedgeBudgets() *hedgeBudgets {
	return &hedgeBudgets{byModel: map[string]*quota.Budget{}}
}

// budget returns model's budget with ratio; the lock is held.
func (b *hedgeBudgets) budget(model string, ratio float64) *quota.Budget {
	q := b.byModel[model]
	if q == nil {
		q = quota.NewBudget(quota.BudgetConfig{Ratio: ratio, MinRetries: hedgeReserve})
		b.byModel[model] = q
	}
	return q
}

// call counts a call of model that may be hedged.
func (b *hedgeBudgets) call(model string, ratio float64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.budget(model, ratio).Request(time.Now())
}

// hedge counts a hedge of a call of model and reports true if the budget
// allows it; a refused hedge is not counted.
func (b *hedgeBudgets) hedge(model string, ratio float64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.budget(model, ratio).Retry(time.Now())
}

// allows reports whether the budget of model would allow a hedge now,
// without counting one.
func (b *hedgeBudgets) allows(model string, ratio float64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.budget(model, ratio).CanRetry(time.Now())
}
