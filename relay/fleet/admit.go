package fleet

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/relaydev/relay/relay/fleet/breaker"
	"github.com/relaydev/relay/relay/fleet/quota"
	"github.com/relaydev/relay/relay/provider"
	"github.com/relaydev/relay/relay/upstream"
	"github.com/relaydev/relay/relay/wire"
)

// claimRecheck bounds a wait for a probe claim another call of this worker
// is making, or that failed to be written.
const claimRecheck = 250 * time.Millisecond

// pauseSlack: a pause already stored that ends at most this much before a
// new one is not raised again, so the workers told the same Retry-After at
// once do not all write it.
const pauseSlack = 250 * time.Millisecond

// Admit asks the breaker, the pause, the rate limits and the retry budget
// of model on provider, in that order (see SharedGate).
func (g *SharedGate) Admit(ctx context.Context, prov, model string) (Ticket, error) {
	p, ok := g.catalog.Provider(prov)
	if !ok {
		return NoTicket{}, nil
	}
	info := CallInfoFrom(ctx)
	a := admission{g: g, p: p, model: model, scope: ScopeOf(p, model), info: info, start: time.Now()}
	a.bcfg = p.Breaker.WithDefaults()
	ticket, err := a.run(ctx)
	a.leaveLine()
	if err != nil {
		g.count(prov+"/"+model, err)
	}
	return ticket, err
}

// admission is one Admit.
type admission struct {
	g     *SharedGate
	p     provider.Config
	bcfg  breaker.Config
	model string
	scope string
	info  CallInfo
	start time.Time
	// waitedFor is when what this call waited for ended (an open
	// breaker's close, a pause's end); zero if it did not wait.
	waitedFor time.Time
	// waitedOpen: the call waited for the breaker.
	waitedOpen bool
	// place is the call's place in its scope's line of waiting calls,
	// zero until it waits (waitline.go).
	place uint64
}

// mayWait reports whether the call may wait for a breaker or a pause, and
// for how long at most: a request waits for its provider as a direct
// client would retry it, unless it asked to fail fast or another
// candidate of its route can take it at once.
func (a *admission) mayWait() (time.Duration, bool) {
	if a.info.FailFast || a.info.Alternatives > 0 || a.bcfg.MaxWait < 0 {
		return 0, false
	}
	left := a.bcfg.MaxWait - time.Since(a.start)
	return left, left > 0
}

func (a *admission) refuse(cause error, retryAfter time.Duration) (Ticket, error) {
	return nil, &UnavailableError{Provider: a.p.Name, Model: a.model, Cause: cause, RetryAfter: retryAfter}
}

func (a *admission) run(ctx context.Context) (Ticket, error) {
	g := a.g
	probe := ""
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		now := time.Now()
		changed := g.view.Breakers.Changed()
		if a.bcfg.Enabled() && probe == "" {
			row, _ := g.view.Breakers.Get(a.scope)
			d, wait := breaker.Decide(row.Value, now)
			if d == breaker.Probe {
				if !a.budgetAllows() {
					return a.refuse(ErrRetryBudget, 0)
				}
				if id, won := g.claim(a.scope, a.bcfg); won {
					probe = id
					d = breaker.Allow
				} else {
					d, wait = breaker.Wait, claimRecheck
				}
			}
			if d == breaker.Wait {
				// An open breaker's wait is until its probe may go, and the
				// verdict comes later: a call that could not outwait even
				// that is refused now. A probe under way is waited for up to
				// the bound (its claim's deadline is far, its verdict near).
				left, ok := a.mayWait()
				if !ok || row.Value.Current() == breaker.Open && left < wait {
					return a.refuse(ErrProviderOpen, breaker.Hint(row.Value, a.bcfg, wait))
				}
				a.joinLine()
				if err := a.sleep(ctx, changed, min(wait, left)); err != nil {
					return nil, err
				}
				a.waitedOpen = true
				continue
			}
			if a.waitedOpen && probe == "" {
				a.waitedFor = row.Value.Since
			}
		}
		prow, paused := g.view.Pauses.Get(a.scope)
		if paused && now.Before(prow.Value.Until) && probe == "" {
			wait := prow.Value.Until.Sub(now)
			if left, ok := a.mayWait(); !ok || left < wait {
				return a.refuse(ErrProviderPaused, wait)
			}
			a.joinLine()
			if err := a.sleep(ctx, g.view.Pauses.Changed(), wait); err != nil {
				return nil, err
			}
			a.waitedFor = prow.Value.Until
			continue
		}
		break
	}
	if probe == "" {
		// The probe goes at once: the others wait for its answer.
		if err := a.spread(ctx); err != nil {
			return nil, err
		}
	}
	if !a.budgetAllows() {
		a.release(probe)
		return a.refuse(ErrRetryBudget, 0)
	}
	reserved, err := a.limits(ctx)
	if err != nil {
		a.release(probe)
		return nil, err
	}
	if err := a.budget(); err != nil {
		a.release(probe)
		a.g.settle(a.p, reserved, 0)
		return nil, err
	}
	return &sharedTicket{g: g, p: a.p, model: a.model, scope: a.scope, probe: probe, reserved: reserved}, nil
}

// sleep waits until changed is closed, d passed or ctx ended.
func (a *admission) sleep(ctx context.Context, changed <-chan struct{}, d time.Duration) error {
	t := time.NewTimer(max(d, time.Millisecond))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-changed:
	case <-t.C:
	}
	return nil
}

// spread delays a call that waited for an outage or a pause to end to its
// slot in the recovery window after that end, which every worker reads
// from the same shared state: the fleet's waiting calls arrive spread over
// the window, not together, and each worker's in the order they came
// (releaseAt).
func (a *admission) spread(ctx context.Context) error {
	jitter := a.bcfg.RecoveryJitter
	if a.waitedFor.IsZero() || jitter <= 0 {
		return nil
	}
	at := a.waitedFor.Add(a.releaseAt(jitter))
	d := time.Until(at)
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// limits reserves the call's tokens-per-minute estimate and takes its
// requests-per-minute token, waiting up to rate_limit.max_wait when the
// route has nothing else to try. It returns the tokens reserved.
func (a *admission) limits(ctx context.Context) (reserved float64, err error) {
	l := a.p.RateLimit
	if l.RPM <= 0 && l.TPM <= 0 {
		return 0, nil
	}
	bound := l.Wait()
	if a.info.Alternatives > 0 || a.info.FailFast {
		bound = 0
	}
	deadline := time.Now().Add(bound)
	tok := wire.KeyToken(a.p.Name)
	check := func(key string, take bool) error {
		for first := true; ; first = false {
			var ok bool
			var wait time.Duration
			switch {
			case take && first:
				ok, wait = a.g.quotas.Take(key, 1)
			case take:
				ok, wait = a.g.quotas.Retake(key, 1)
			default:
				ok, wait, reserved = a.g.quotas.Reserve(key, first)
			}
			if ok {
				return nil
			}
			if time.Until(deadline) < wait {
				_, err := a.refuse(ErrQuotaExhausted, wait)
				return err
			}
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			case <-t.C:
			}
		}
	}
	if l.TPM > 0 {
		if err := check(quota.ProviderTPM(tok), false); err != nil {
			return 0, err
		}
	}
	if l.RPM > 0 {
		if err := check(quota.ProviderRPM(tok), true); err != nil {
			a.g.settle(a.p, reserved, 0)
			return 0, err
		}
	}
	return reserved, nil
}

// settle pays a call's tokens against what it reserved.
func (g *SharedGate) settle(p provider.Config, reserved float64, tokens int) {
	if p.RateLimit.TPM > 0 {
		g.quotas.Settle(quota.ProviderTPM(wire.KeyToken(p.Name)), reserved, float64(tokens))
	}
}

// budget counts the call in its scope's retry budget, refusing a retry
// the budget has no room for. A call that continues an answer its
// provider was streaming is neither counted nor refused: the budget keeps
// retries off a provider that fails, and this one answers. Nor is a call
// that follows a Retry-After: the shared pause already paced it.
func (a *admission) budget() error {
	g := a.g
	g.mu.Lock()
	defer g.mu.Unlock()
	b := g.budgetOf(a.p, a.scope)
	now := time.Now()
	total := g.budgeted[a.scope]
	if total == nil {
		total = &quota.Retries{}
		g.budgeted[a.scope] = total
	}
	if !a.info.Retry {
		b.Request(now)
		total.Requests++
		return nil
	}
	if a.info.AfterContent || a.info.Paced {
		return nil
	}
	if !b.Retry(now) {
		g.denied["budget:"+a.scope]++
		_, err := a.refuse(ErrRetryBudget, 0)
		return err
	}
	total.Retries++
	return nil
}

// budgetAllows reports whether the retry budget has room for this call,
// without counting it: a retry the budget will refuse should not claim a
// probe or a rate-limit token first.
func (a *admission) budgetAllows() bool {
	if !a.info.Retry || a.info.AfterContent || a.info.Paced {
		return true
	}
	a.g.mu.Lock()
	defer a.g.mu.Unlock()
	if a.g.budgetOf(a.p, a.scope).CanRetry(time.Now()) {
		return true
	}
	a.g.denied["budget:"+a.scope]++
	return false
}

// release gives up a probe claim that no call will use.
func (a *admission) release(probe string) {
	if probe == "" {
		return
	}
	a.g.transition(a.scope, func(cur breaker.State) (breaker.State, breaker.Event, bool) {
		return breaker.Resolve(cur, a.bcfg, time.Now(), a.scope, a.g.id, probe, breaker.Neutral, "probe not sent: "+a.p.Name+" refused by a limit")
	})
}

// claim tries to make this worker the holder of the breaker's probe. Only
// one call per worker tries at a time; the others wait for the result.
func (g *SharedGate) claim(scope string, cfg breaker.Config) (string, bool) {
	g.mu.Lock()
	st := g.scope(scope)
	if st.claiming {
		g.mu.Unlock()
		return "", false
	}
	st.claiming = true
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		st.claiming = false
		g.mu.Unlock()
	}()
	id := g.id + "-" + randomID()
	won := g.transition(scope, func(cur breaker.State) (breaker.State, breaker.Event, bool) {
		return breaker.Claim(cur, cfg, time.Now(), scope, g.id, id)
	})
	return id, won
}

// count records a refused call.
func (g *SharedGate) count(target string, err error) {
	cause := "other"
	switch {
	case errors.Is(err, ErrProviderOpen):
		cause = "open"
	case errors.Is(err, ErrProviderPaused):
		cause = "paused"
	case errors.Is(err, ErrRetryBudget):
		cause = "budget"
	case errors.Is(err, ErrQuotaExhausted):
		cause = "quota"
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.denied[cause]++
	c := g.callsOf(target)
	c.Refused++
	if cause == "open" {
		c.Open++
	}
}

func (g *SharedGate) callsOf(target string) *quota.Calls {
	c := g.calls[target]
	if c == nil {
		c = &quota.Calls{}
		g.calls[target] = c
	}
	return c
}

// sharedTicket is one admitted call.
type sharedTicket struct {
	g     *SharedGate
	p     provider.Config
	model string
	scope string
	probe string
	// reserved are the tokens per minute taken at admission.
	reserved float64
}

// Started closes a half-open breaker as soon as its probe is answered
// with a stream: the provider is back, and the calls waiting for it need
// not wait for the end of a long answer. The call then counts like any
// other when it is Done.
func (t *sharedTicket) Started() {
	if t.probe == "" {
		return
	}
	probe := t.probe
	t.probe = ""
	cfg := t.p.Breaker.WithDefaults()
	t.g.transition(t.scope, func(cur breaker.State) (breaker.State, breaker.Event, bool) {
		return breaker.Resolve(cur, cfg, time.Now(), t.scope, t.g.id, probe, breaker.Success, "probe answered with a stream")
	})
}

// Done counts the call, pays its tokens, raises the shared pause if the
// provider asked to wait, and moves the breaker: the probe's verdict
// resolves a half-open breaker; otherwise the worker's tally of the
// breaker's recent calls may trip it (breaker.Tally).
func (t *sharedTicket) Done(r Report) {
	g := t.g
	now := time.Now()
	v := breakerVerdict(r)
	cfg := t.p.Breaker.WithDefaults()
	// Calls that end while the breaker is not closed were mostly admitted
	// before it opened: they tell of the outage already acted upon, and
	// must not count against the provider once it is back.
	closed := g.Breaker(t.scope).Current() == breaker.Closed
	g.mu.Lock()
	c := g.callsOf(t.p.Name + "/" + t.model)
	c.Calls++
	if r.Verdict == breaker.Failure && v != breaker.Neutral {
		c.Failures++
		c.LastFailure, c.LastError = now.UTC(), r.Class.String()
	}
	tripped, why := false, ""
	if t.probe == "" && cfg.Enabled() {
		tally := &g.scope(t.scope).tally
		if closed {
			tripped, why = tally.Observe(v, now, cfg)
		} else {
			tally.Reset()
		}
	}
	g.mu.Unlock()

	g.settle(t.p, t.reserved, r.Tokens)
	if r.TTFT > 0 {
		g.ttft.observe(t.p.Name+"/"+t.model, r.TTFT, now)
	}
	if r.RetryAfter > 0 && r.Verdict != breaker.Success && r.Class == upstream.Transient {
		g.pause(t.scope, now.Add(r.RetryAfter), r.RetryAfter)
	}
	switch {
	case t.probe != "":
		reason := "probe " + v.String()
		if r.Err != nil {
			reason += ": " + r.Class.String()
		}
		g.transition(t.scope, func(cur breaker.State) (breaker.State, breaker.Event, bool) {
			return breaker.Resolve(cur, cfg, time.Now(), t.scope, g.id, t.probe, v, reason)
		})
	case tripped:
		written := false
		if row, _ := g.view.Breakers.Get(t.scope); row.Value.Current() == breaker.Closed {
			written = g.transition(t.scope, func(cur breaker.State) (breaker.State, breaker.Event, bool) {
				return breaker.Trip(cur, cfg, time.Now(), t.scope, g.id, why+", the last "+r.Class.String())
			})
		}
		if written || g.Breaker(t.scope).Current() != breaker.Closed {
			g.mu.Lock()
			g.scope(t.scope).tally.Reset()
			g.mu.Unlock()
		}
	}
}

// breakerVerdict is what the breaker counts of a report: a 429 says the
// provider is busy, not broken, and is handled by the shared pause; a call
// that streamed content before it failed says the provider answers (a cut
// or a stall mid-answer is weather, which the retries and continuations
// absorb, and counting it made a long-answer workload open the breaker on
// a healthy provider).
func breakerVerdict(r Report) breaker.Verdict {
	if r.Verdict != breaker.Failure {
		return r.Verdict
	}
	if se := (*upstream.StatusError)(nil); errors.As(r.Err, &se) && se.Status == http.StatusTooManyRequests {
		return breaker.Neutral
	}
	if r.Streamed {
		return breaker.Success
	}
	return breaker.Failure
}

// pause raises the shared pause of scope to until, unless the local copy
// already holds one about as long.
func (g *SharedGate) pause(scope string, until time.Time, asked time.Duration) {
	if row, ok := g.view.Pauses.Get(scope); ok && !row.Value.Until.Before(until.Add(-pauseSlack)) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), stateWriteTimeout)
	defer cancel()
	_, written, err := g.view.Pauses.Update(ctx, scope, func(cur wire.Pause, exists bool) (wire.Pause, error) {
		if exists && !cur.Until.Before(until.Add(-pauseSlack)) {
			return cur, ErrNoChange
		}
		return wire.Pause{Until: until.UTC(), RetryAfterMS: asked.Milliseconds(), By: g.id, At: time.Now().UTC()}, nil
	})
	switch {
	case err != nil:
		g.log.Warn("pause not shared", "scope", scope, "err", err)
	case written:
		g.log.Info("provider paused for the cluster", "scope", scope, "retry_after", asked, "until", until)
	}
}
