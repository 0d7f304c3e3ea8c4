package edge

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/relay/spend"
	"github.com/relaydev/relay/relay/wire"
)

// # Spend budgets
//
// Tenants (edge.spend.tenants) and keys (edge.api_keys[].budget) may have
// token and cost budgets per UTC day and month. Workers record each
// stream's and each forwarded request's usage once in the usage ledger
// (relay/spend); the edge follows the current month's records with a
// watch, so the used amounts are a local sum. A used-up budget refuses a
// new generation or forwarded request with 429 insufficient_quota, saying
// which budget and when it resets, with Retry-After until then.
//
// Usage is known only at a request's end, so each request of a scope
// with a budget holds its largest possible cost from admission, before
// it waits for a slot (admit_spend_hold.go): one compare-and-set key per
// tenant and per key in the ledger, shared by every edge. A request is
// admitted while used plus held is under the budget, else refused with a
// 429 to retry shortly; the last one admitted may take a budget past by
// at most its own largest cost. A hold stops counting once the ledger's
// record of its request is seen, or when the request ends with no usage.
//
// A tenant past its soft budgets has its generations for a model of its
// downgrade list sent to the cheaper model instead; the answer's model
// says which ran. Usage crossing edge.spend.warn_at of a budget is logged
// once per budget and period by each edge, and counted.
//
// While the ledger cannot be read (at start, for up to ledgerWait, after
// a failure) or a hold cannot be written, nothing is refused, held or
// downgraded: budgets fail open, as the rate limits do. Without budgets,
// no ledger is read and nothing is held.

// CodeInsufficientQuota is the code, and the type, of a used-up budget's
// 429: OpenAI's for an account out of credit, which SDKs do not retry.
const CodeInsufficientQuota = "insufficient_quota"

// spendGuard is an edge's view of the budgets and of the ledger.
type spendGuard struct {
	warnAt  float64
	tenants map[string]TenantSpend
	keys    map[string]spend.Limits // by spend.KeyID
	// keysOf lists each tenant's configured keys, for GET /v1/relay/usage.
	keysOf map[string][]string

	mu sync.Mutex
	// tally is the ledger's sums once following it started; retryAt
	// spaces the attempts to open the ledger.
	tally   *spend.Tally
	retryAt time.Time
	stopRun func()
	// warned holds the warnings logged, by scope, budget and period.
	warned map[string]bool
	// kv is the ledger, where holds are stored, once opened.
	kv    jetstream.KeyValue
	holds spendHolds
	// maxTokens, maxN and maxBestOf are the caps of a tenant without
	// its own (admit_spend_hold.go).
	maxTokens, maxN, maxBestOf int
}

func newSpendGuard(cfg Config) *spendGuard {
	c := cfg.Spend.withDefaults()
	g := &spendGuard{warnAt: c.WarnAt, tenants: map[string]TenantSpend{}, keys: map[string]spend.Limits{},
		keysOf: map[string][]string{}, warned: map[string]bool{},
		maxTokens: cfg.MaxTokensCap, maxN: c.MaxN, maxBestOf: c.MaxBestOf}
	for _, t := range c.Tenants {
		g.tenants[t.Tenant] = t
	}
	for _, k := range cfg.APIKeys {
		id := spend.KeyID(k.KeySHA256)
		g.keysOf[k.Tenant] = append(g.keysOf[k.Tenant], id)
		if !k.Budget.IsZero() {
			g.keys[id] = k.Budget
		}
	}
	return g
}

// tracked reports whether tenant or one of its keys has a hard budget:
// the tally remembers the records of their requests, for their holds.
func (g *spendGuard) tracked(tenant string) bool {
	if t, ok := g.tenants[tenant]; ok && !t.Limits.IsZero() {
		return true
	}
	for _, k := range g.keysOf[tenant] {
		if _, ok := g.keys[k]; ok {
			return true
		}
	}
	return false
}

// enabled reports whether any budget is configured.
func (g *spendGuard) enabled() bool { return len(g.tenants) > 0 || len(g.keys) > 0 }

// ledgerRetry spaces the attempts to open the usage ledger.
const ledgerRetry = 5 * time.Second

// ledger returns the tally of the usage ledger, starting to follow it on
// first use; nil while the ledger cannot be opened.
func (s *Server) ledger() *spend.Tally {
	g := s.spend
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.tally != nil || time.Now().Before(g.retryAt) {
		return g.tally
	}
	ctx, cancel := context.WithTimeout(context.Background(), natsTimeout)
	defer cancel()
	kv, err := s.js.KeyValue(ctx, wire.UsageBucket)
	if err != nil {
		g.retryAt = time.Now().Add(ledgerRetry)
		s.log.Warn("usage ledger unavailable; budgets are not checked", "err", err, "retry_in", ledgerRetry)
		return nil
	}
	g.tally = spend.NewTally(g.tracked)
	g.kv = kv
	g.stopRun = followLedger(s.nc, kv, g.tally, s.log)
	return g.tally
}

// followLedger runs t from kv until the returned stop is called or nc
// closes (an edge used only through its Handler has no stop of its own).
func followLedger(nc *nats.Conn, kv jetstream.KeyValue, t *spend.Tally, log *slog.Logger) (stop func()) {
	run, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { t.Run(run, kv, log) })
	wg.Go(func() {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-run.Done():
				return
			case <-tick.C:
			}
			if nc.IsClosed() {
				cancel()
				return
			}
		}
	})
	return func() { cancel(); wg.Wait() }
}

// stopSpend stops following the ledger, if it started: Serve does as it
// returns.
func (s *Server) stopSpend() {
	g := s.spend
	g.mu.Lock()
	stop := g.stopRun
	g.tally, g.stopRun = nil, nil
	g.mu.Unlock()
	if stop != nil {
		stop()
	}
}

// admitSpend refuses a new generation of the request's tenant or key
// once one of their budgets is used up (admit_cluster.go asks).
func (s *Server) admitSpend(ctx context.Context, tenant string) *wire.Error {
	g := s.spend
	if !g.enabled() {
		return nil
	}
	t := s.ledger()
	if t == nil || !t.Ready() {
		return nil
	}
	now := time.Now()
	key := principalIn(ctx).key
	if lim, ok := g.tenants[tenant]; ok {
		if e := s.checkBudget(t.Tenant(tenant, now), lim.Limits, "tenant", "tenant "+tenant, tenant, now); e != nil {
			return e
		}
	}
	if lim, ok := g.keys[key]; ok {
		return s.checkBudget(t.Key(tenant, key, now), lim, "key", "API key "+key, key, now)
	}
	return nil
}

// checkBudget warns about, and refuses on, the budgets lim of one scope
// ("tenant" or "key", named whose, identified by id) that used u.
func (s *Server) checkBudget(u spend.Usage, lim spend.Limits, scope, whose, id string, now time.Time) *wire.Error {
	if lv, ok := lim.Reached(u, s.spend.warnAt); ok {
		s.warnSpend(lv, scope, whose, id, now)
	}
	lv, ok := lim.Exhausted(u)
	if !ok {
		return nil
	}
	s.obs.m.SpendRefusal(string(lv.Budget), scope)
	reset := lv.Budget.ResetAt(now)
	return &wire.Error{
		Message: fmt.Sprintf("The %s budget of %s is used up (%s of %s); it resets at %s.",
			budgetWords(lv.Budget), whose, amount(lv.Budget, lv.Used), amount(lv.Budget, lv.Limit), reset.Format(time.RFC3339)),
		Type:         CodeInsufficientQuota,
		Code:         CodeInsufficientQuota,
		Status:       http.StatusTooManyRequests,
		RetryAfterMS: max(reset.Sub(now).Milliseconds(), 1),
	}
}

// warnSpend logs and counts lv's crossing of the warning threshold, once
// per scope, budget and period on this edge.
func (s *Server) warnSpend(lv spend.Level, scope, whose, id string, now time.Time) {
	period := spend.MonthOf(now)
	if lv.Budget.Daily() {
		period = spend.DayOf(now)
	}
	g := s.spend
	mark := scope + "\x00" + id + "\x00" + string(lv.Budget) + "\x00" + period
	g.mu.Lock()
	if g.warned[mark] {
		g.mu.Unlock()
		return
	}
	if len(g.warned) >= maxWarned {
		clear(g.warned) // past periods' marks; a repeat warning is harmless
	}
	g.warned[mark] = true
	g.mu.Unlock()
	s.obs.m.SpendWarning(string(lv.Budget), scope)
	s.log.Warn("spend budget nearly used up", "scope", scope, "of", whose, "budget", string(lv.Budget),
		"used", lv.Used, "limit", lv.Limit, "fraction", lv.Fraction(), "period", period)
}

// maxWarned bounds the warnings remembered.
const maxWarned = 10_000

// downgradeForSpend sends req to its tenant's cheaper model when the
// tenant is past its soft budgets and req's model has one (and the key
// may use it).
func (s *Server) downgradeForSpend(ctx context.Context, tenant string, req chatRequest) chatRequest {
	ts, ok := s.spend.tenants[tenant]
	if !ok || ts.Soft.IsZero() {
		return req
	}
	to := ""
	for _, d := range ts.Downgrade {
		if d.From == req.Model {
			to = d.To
		}
	}
	if to == "" || !principalIn(ctx).allows(to) {
		return req
	}
	t := s.ledger()
	if t == nil || !t.Ready() {
		return req
	}
	lv, past := ts.Soft.Exhausted(t.Tenant(tenant, time.Now()))
	if !past {
		return req
	}
	s.obs.m.SpendDowngrade()
	s.log.Info("generation downgraded: tenant past its soft budget", "tenant", tenant, "budget", string(lv.Budget),
		"from", req.Model, "to", to)
	req.Model = to
	return req
}

// principalIn is the principal of the request ctx serves: every path that
// starts a generation (HTTP, WebSocket) runs under its request's context.
func principalIn(ctx context.Context) principal {
	p, _ := ctx.Value(principalKey{}).(principal)
	return p
}

// budgetWords names b in a sentence.
func budgetWords(b spend.Budget) string {
	switch b {
	case spend.DailyTokens:
		return "daily token"
	case spend.DailyCost:
		return "daily cost"
	case spend.MonthlyTokens:
		return "monthly token"
	}
	return "monthly cost"
}

// amount renders v as b counts it: tokens, or US dollars to the cent
// (to 1/10,000 of a dollar under one, as budgets of cents exist).
func amount(b spend.Budget, v float64) string {
	switch {
	case b == spend.DailyTokens || b == spend.MonthlyTokens:
		return strconv.FormatFloat(v, 'f', 0, 64) + " tokens"
	case v < 1:
		return "$" + strconv.FormatFloat(v, 'f', 4, 64)
	}
	return "$" + strconv.FormatFloat(v, 'f', 2, 64)
}
