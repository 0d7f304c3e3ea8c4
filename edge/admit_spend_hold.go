package edge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/relaydev/relay/relay/dialect/chat"
	"github.com/relaydev/relay/relay/spend"
	"github.com/relaydev/relay/relay/wire"
)

// CodeAboveMax is the code of a 400 for a parameter over its cap
// (edge.spend.max_n, max_best_of), OpenAI's.
const CodeAboveMax = "integer_above_max_value"

// holdRetry is the Retry-After of a request refused because requests in
// progress hold what is left of a budget: they settle as they end.
const holdRetry = 2 * time.Second

// spendHolds are an edge's reservations in progress: which scopes each
// request holds, to release them, and one lock per scope, so that this
// edge's own reservations in a scope wait for each other rather than
// lose compare-and-sets to each other.
type spendHolds struct {
	mu     sync.Mutex
	scopes map[string]*sync.Mutex
	of     map[string]heldBy // by request id
}

// heldBy is what one request holds, since when.
type heldBy struct {
	scopes []string
	at     time.Time
}

func (h *spendHolds) lock(scope string) func() {
	h.mu.Lock()
	if h.scopes == nil {
		h.scopes, h.of = map[string]*sync.Mutex{}, map[string]heldBy{}
	}
	m := h.scopes[scope]
	if m == nil {
		m = new(sync.Mutex)
		h.scopes[scope] = m
	}
	h.mu.Unlock()
	m.Lock()
	return m.Unlock
}

// maxTokensFor is tenant's max_tokens cap.
func (g *spendGuard) maxTokensFor(tenant string) int {
	if t, ok := g.tenants[tenant]; ok && t.MaxTokens != 0 {
		return t.MaxTokens
	}
	return g.maxTokens
}

// choicesCaps are tenant's caps on n and best_of.
func (g *spendGuard) choicesCaps(tenant string) (n, bestOf int) {
	n, bestOf = g.maxN, g.maxBestOf
	if t, ok := g.tenants[tenant]; ok {
		if t.MaxN != 0 {
			n = t.MaxN
		}
		if t.MaxBestOf != 0 {
			bestOf = t.MaxBestOf
		}
	}
	return n, bestOf
}

// budgeted reports whether tenant or its key has a hard budget: only
// their requests are reserved for.
func (g *spendGuard) budgeted(tenant, key string) bool {
	t, ok := g.tenants[tenant]
	_, keyed := g.keys[key]
	return ok && !t.Limits.IsZero() || keyed
}

// largestCost is the most a request of body for model may cost: its
// prompt at most one token per byte of its body (no tokenizer makes a
// token of less than a byte), and choices answers of at most maxTokens
// (the request's own max_tokens or, without one, the tenant's cap), at the
// dearest price of the model's route.
func (s *Server) largestCost(model string, body []byte, maxTokens, choices int) spend.Hold {
	completion := int64(maxTokens) * int64(max(choices, 1))
	prompt := int64(len(body))
	h := spend.Hold{Tokens: prompt + completion, Expires: time.Now().Add(spend.HoldTTL).Unix()}
	for _, c := range s.catalog.Route(model) {
		h.CostUSD = max(h.CostUSD, c.Price.Cost(int(prompt), int(completion)))
	}
	return h
}

// requestedMaxTokens is the max_tokens a request's body asks for (any of
// the dialects' names), or tenant's cap when it names none (an uncapped
// edge: DefaultMaxTokensCap).
func (s *Server) requestedMaxTokens(tenant string, fields map[string]json.RawMessage) int {
	for _, name := range []string{"max_tokens", "max_completion_tokens", "max_output_tokens"} {
		var v int
		if raw, ok := fields[name]; ok && json.Unmarshal(raw, &v) == nil && v > 0 {
			return v
		}
	}
	if c := s.spend.maxTokensFor(tenant); c > 0 {
		return c
	}
	return DefaultMaxTokensCap
}

// generationCost is the largest cost of a generation, for its hold.
func (s *Server) generationCost(tenant string, req chatRequest) spend.Hold {
	var fields map[string]json.RawMessage
	_ = json.Unmarshal(req.Body, &fields) // checked before: a JSON object
	return s.largestCost(req.Model, req.Body, s.requestedMaxTokens(tenant, fields), 1)
}

// forwardCost checks a forwarded request's n and best_of against tenant's
// caps and returns its largest cost: embeddings cost their input, and a
// completion up to max_tokens for each of its best_of (or n) choices.
func (s *Server) forwardCost(tenant string, req wire.ForwardRequest) (spend.Hold, *wire.Error) {
	var fields map[string]json.RawMessage
	_ = json.Unmarshal(req.Body, &fields) // parseForwardRequest checked it
	if req.Endpoint == wire.EndpointEmbeddings {
		return s.largestCost(req.Model, req.Body, 0, 0), nil
	}
	capN, capBestOf := s.spend.choicesCaps(tenant)
	n, e := choicesParam(fields, "n", capN)
	if e != nil {
		return spend.Hold{}, e
	}
	bestOf, e := choicesParam(fields, "best_of", capBestOf)
	if e != nil {
		return spend.Hold{}, e
	}
	return s.largestCost(req.Model, req.Body, s.requestedMaxTokens(tenant, fields), max(n, bestOf)), nil
}

// choicesParam is the member name of fields, a count of choices: 1 if
// absent, else a positive integer within limit (negative: none).
func choicesParam(fields map[string]json.RawMessage, name string, limit int) (int, *wire.Error) {
	raw, ok := fields[name]
	if !ok || isNull(raw) {
		return 1, nil
	}
	var v int
	if json.Unmarshal(raw, &v) != nil || v < 1 {
		return 0, chat.Invalid(name, CodeInvalidValue, "'%s' must be a positive integer", name)
	}
	if limit >= 0 && v > limit {
		return 0, chat.Invalid(name, CodeAboveMax, "'%s' is %d; this relay allows at most %d", name, v, limit)
	}
	return v, nil
}

// reserveSpend holds cost, request id's largest cost, against the budgets
// of its tenant and key that are set, or refuses it: with 429
// insufficient_quota if the ledger's usage alone used a budget up, else
// with 429 rate_limit_exceeded while requests in progress hold the rest
// (used plus held reached the budget). The last request admitted may take
// a budget past by at most its own largest cost, whatever the number of
// edges and of concurrent requests. Once it returned nil, call release if
// the request was not served (refused later, not queued, no usage): a
// hold otherwise stops counting once the ledger records the request's
// real cost, or after spend.HoldTTL. While the ledger cannot be read or
// written, nothing is held or refused.
func (s *Server) reserveSpend(ctx context.Context, tenant, id string, cost func() spend.Hold) (release func(), e *wire.Error) {
	none := func() {}
	g := s.spend
	key := principalIn(ctx).key
	if !g.enabled() || !g.budgeted(tenant, key) {
		return none, nil
	}
	t := s.ledger()
	if t == nil || !s.ledgerRead(ctx, t) {
		return none, nil
	}
	kv, h := g.kv, cost()
	var scopes []string
	releaseAll := func() {
		if len(scopes) > 0 {
			s.releaseSpend(t, id, scopes)
		}
	}
	// used is read after held, at each try: a hold leaves the count only
	// once the tally counts its record, so no cost is ever missed.
	try := func(scope string, lim spend.Limits, usedNow func(time.Time) spend.Usage, level, whose, who string) *wire.Error {
		unlock := g.holds.lock(scope)
		defer unlock()
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), natsTimeout)
		defer cancel()
		err := spend.Reserve(ctx, kv, t, scope, id, h, func(held spend.Totals) error {
			now := time.Now()
			used := usedNow(now)
			if e := s.checkBudget(used, lim, level, whose, who, now); e != nil {
				return e
			}
			withHeld := spend.Usage{Day: used.Day.Add(held), Month: used.Month.Add(held)}
			if lv, ok := lim.Exhausted(withHeld); ok {
				return heldUp(lv, whose)
			}
			return nil
		})
		var we *wire.Error
		switch {
		case errors.As(err, &we):
			return we
		case errors.Is(err, spend.ErrTooManyHolds):
			return &wire.Error{
				Message:      fmt.Sprintf("Too many requests of %s are in progress against its budget; retry when some have ended.", whose),
				Type:         "requests",
				Code:         CodeRateLimited,
				Status:       http.StatusTooManyRequests,
				RetryAfterMS: holdRetry.Milliseconds(),
			}
		case err != nil:
			s.log.Warn("spend hold not stored; the request is not reserved for", "scope", scope, "err", err)
			return nil
		}
		scopes = append(scopes, scope)
		return nil
	}
	if lim, ok := g.tenants[tenant]; ok && !lim.Limits.IsZero() {
		used := func(now time.Time) spend.Usage { return t.Tenant(tenant, now) }
		if e := try(spend.TenantScope(tenant), lim.Limits, used, "tenant", "tenant "+tenant, tenant); e != nil {
			return nil, e
		}
	}
	if lim, ok := g.keys[key]; ok {
		used := func(now time.Time) spend.Usage { return t.Key(tenant, key, now) }
		if e := try(spend.KeyScope(tenant, key), lim, used, "key", "API key "+key, key); e != nil {
			releaseAll()
			return nil, e
		}
	}
	if len(scopes) == 0 {
		return none, nil
	}
	now := time.Now()
	g.holds.mu.Lock()
	g.holds.of[id] = heldBy{scopes: scopes, at: now}
	if len(g.holds.of)%1024 == 0 {
		for k, o := range g.holds.of {
			if now.Sub(o.at) > spend.HoldTTL {
				delete(g.holds.of, k) // expired: nothing left to release
			}
		}
	}
	g.holds.mu.Unlock()
	return func() { s.settleSpend(id, nil) }, nil
}

// ledgerWait bounds the wait of a request with a budget for the ledger
// to be read, when the edge just started following it: a burst at an
// edge's start is not let through unchecked.
const ledgerWait = 2 * time.Second

// ledgerRead waits, at most ledgerWait, for t to have read the ledger.
func (s *Server) ledgerRead(ctx context.Context, t *spend.Tally) bool {
	if t.Ready() {
		return true
	}
	ctx, cancel := context.WithTimeout(ctx, ledgerWait)
	defer cancel()
	return t.WaitReady(ctx)
}

// heldUp is the 429 of a budget that the holds of requests in progress
// take up.
func heldUp(lv spend.Level, whose string) *wire.Error {
	return &wire.Error{
		Message: fmt.Sprintf("The %s budget of %s (%s) is taken up by requests in progress; retry once they end.",
			budgetWords(lv.Budget), whose, amount(lv.Budget, lv.Limit)),
		Type:         "tokens",
		Code:         CodeRateLimited,
		Status:       http.StatusTooManyRequests,
		RetryAfterMS: holdRetry.Milliseconds(),
	}
}

// settleSpend is told the end of request id (usage nil: it was not
// served, or reported none): a request without usage has no record to
// replace its hold, so the hold is released now; one with usage keeps its
// hold until the ledger's record of it is seen.
func (s *Server) settleSpend(id string, usage *wire.Usage) {
	g := s.spend
	if !g.enabled() {
		return
	}
	g.holds.mu.Lock()
	h, ok := g.holds.of[id]
	delete(g.holds.of, id)
	g.holds.mu.Unlock()
	if !ok || usage != nil && usage.TotalTokens+usage.PromptTokens+usage.CompletionTokens > 0 {
		return
	}
	t := s.ledger()
	if t == nil {
		return
	}
	s.releaseSpend(t, id, h.scopes)
}

// releaseSpend drops request id's holds in scopes.
func (s *Server) releaseSpend(t *spend.Tally, id string, scopes []string) {
	ctx, cancel := context.WithTimeout(context.Background(), natsTimeout)
	defer cancel()
	for _, scope := range scopes {
		unlock := s.spend.holds.lock(scope)
		err := spend.Release(ctx, s.spend.kv, t, scope, id)
		unlock()
		if err != nil {
			s.log.Warn("spend hold not released; it counts until it expires", "scope", scope, "id", id, "err", err)
		}
	}
}
