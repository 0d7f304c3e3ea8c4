package worker

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/relaydev/relay/relay/apikeys"
	"github.com/relaydev/relay/relay/backoff"
	"github.com/relaydev/relay/relay/fleet"
	"github.com/relaydev/relay/relay/fleet/breaker"
	"github.com/relaydev/relay/relay/provider"
	"github.com/relaydev/relay/relay/upstream"
	"github.com/relaydev/relay/relay/wire"
)

// maxRetryAfter is the longest wait a provider may ask for (Retry-After)
// and still be waited for: longer, and the request moves on along its
// route, or gives up, rather than leave a client staring at nothing.
const maxRetryAfter = time.Minute

// serve answers the request. A request on a stream that holds nothing
// yet is answered from the cache if its model's cache prefers a kept
// answer for a deterministic request, and one is kept (keptFirst).
// Otherwise serve is the attempt loop: it calls the candidates of the
// request's route (see routeState) until an attempt finishes the answer,
// one fails in a way no other attempt can fix (the request's own fault, a
// cut answer that holds tool calls, a lost stream, a shutdown), or the
// budgets are spent. Every attempt after the first continues the text already
// published, so the client sees one answer. takeover says that the text
// was published by an earlier worker.
func (j *job) serve(ctx context.Context, takeover bool) outcome {
	var s *serving
	var settled *outcome
	j.w.aside(func() { s, settled = j.startServing(takeover) })
	if settled != nil {
		return *settled
	}
	// Whichever way the loop ends, the stream ended on candidate s.i.
	defer s.done(j)
	for {
		if s.limited && j.tokensOut >= s.limit {
			// The answer has every token the client allowed: a provider
			// would have stopped here with the same reason.
			return outcome{finishReason: "length"}
		}
		before := j.text.Len()
		out := j.call(j.callContext(ctx, s.state, s.i, takeover), &s.route[s.i], s.seam)
		if out.final(ctx, j.toolCalls) {
			if j.toolCalls && out.err != nil && out.class == upstream.Transient {
				out.err = chain(errNoToolCallContinuation, out.err)
			}
			return out
		}
		if !j.again(ctx, s, j.text.Len() > before, &out) {
			return out
		}
	}
}

// serving is serve's loop: the route, what was called on it, the
// candidate called next and how its first chunk is marked, and the
// client's limit on the answer's tokens.
type serving struct {
	route   []provider.Candidate
	state   *routeState
	i       int
	seam    wire.Seam
	limit   int
	limited bool
}

// startServing sets up serve's loop, or settles the request before it:
// with a kept answer, or refused for want of a route.
func (j *job) startServing(takeover bool) (*serving, *outcome) {
	if !takeover {
		if out := j.keptFirst(); out != nil {
			return nil, out
		}
	}
	if j.toolCalls {
		out := refused(errNoToolCallContinuation)
		return nil, &out
	}
	route := j.w.route(j.req)
	if len(route) == 0 {
		out := refused(modelNotServed(j.req.Model))
		return nil, &out
	}
	s := &serving{route: route, state: newRouteState(route)}
	if takeover {
		s.seam = wire.SeamTakeover
	}
	s.limit, s.limited = tokenLimit(j.req.Body)
	return s, nil
}

// done records where the stream went: the route's first candidate and
// the one it ended on.
func (s *serving) done(j *job) {
	j.routed = &routed{first: s.route[0], last: s.route[s.i]}
}

// again moves s on after the attempt on candidate s.i failed with out,
// having published text if progress: to the next candidate at once, or to
// the same one after a backoff. It reports false if serve gives up with
// out, whose error then says why.
func (j *job) again(ctx context.Context, s *serving, progress bool, out *outcome) bool {
	next, delay, ok := j.failedAttempt(s.state, s.i, progress, out)
	switch {
	case !ok:
		return false
	case next != s.i:
		s.i, s.seam = next, wire.SeamFallback
		return true
	}
	if err := (backoff.Backoff{}).Sleep(ctx, delay); err != nil {
		*out = outcome{err: err, class: upstream.Canceled}
		return false
	}
	s.seam = wire.SeamRetry
	if j.text.Len() > 0 {
		s.seam = wire.SeamContinuation
	}
	return true
}

// callContext is ctx as the call of candidate i takes it: with what the
// gate is told of the call, and the hedge plan.
func (j *job) callContext(ctx context.Context, state *routeState, i int, takeover bool) context.Context {
	return j.withHedge(fleet.WithCallInfo(ctx, j.callInfo(state, i, takeover)), state, i, takeover)
}

// failedAttempt records in state that the attempt on candidate i failed
// with out, which published text if progress, and says what the loop does
// next: call candidate next after delay, or, if not ok, give up with out
// (whose error then says why).
func (j *job) failedAttempt(state *routeState, i int, progress bool, out *outcome) (next int, delay time.Duration, ok bool) {
	c := &state.route[i]
	switch {
	case errors.Is(out.err, fleet.ErrProviderUnavailable):
		state.close(i)
	case out.class == upstream.Credential:
		// Every key of the provider was refused.
		state.closeProvider(c.Provider.Name)
	case out.class == upstream.RequestFault:
		// Too long for the model (final lets no other request fault
		// through): a step with a larger context window may take it.
		needed, _ := upstream.TooLong(out.err)
		state.outgrow(i, needed)
	default:
		state.failed(i, progress, out.retryAfter)
		switch {
		case out.retryAfter > maxRetryAfter:
			state.close(i)
		case errors.Is(out.err, upstream.ErrSilent):
			// A provider that takes the call and says nothing for the
			// whole first-byte bound is as good as down: the next step
			// of the route is called rather than this one again.
			state.spend(i)
		}
	}
	next, ok = state.next(i)
	if !ok {
		if out.class == upstream.Transient && !errors.Is(out.err, fleet.ErrProviderUnavailable) && out.retryAfter <= maxRetryAfter {
			out.err = chain(errRetriesExhausted, out.err)
		}
		j.log.Info("attempt failed; giving up", "provider", c.Provider.Name, "model", c.Model, "attempt", j.attempts, "class", out.class, "err", out.err)
		return i, 0, false
	}
	if next != i {
		n := &state.route[next]
		j.log.Info("attempt failed; falling back", "provider", c.Provider.Name, "model", c.Model, "attempt", j.attempts,
			"class", out.class, "err", out.err, "next_provider", n.Provider.Name, "next_model", n.Model)
		return next, 0, true
	}
	b := backoff.Backoff{Config: c.Provider.Retry}
	delay = b.Delay(state.streak-1, out.retryAfter)
	j.log.Info("attempt failed; retrying", "provider", c.Provider.Name, "model", c.Model, "attempt", j.attempts,
		"class", out.class, "err", out.err, "delay", delay)
	return i, delay, true
}

// final reports whether no other attempt can change out: the answer is
// finished, the stream lost or the job stopping, the request at fault
// (unless it is only too long for the model: a larger one may take it), or
// the cut answer holds tool calls.
func (out outcome) final(ctx context.Context, toolCalls bool) bool {
	switch {
	case out.err == nil, out.logErr != nil, ctx.Err() != nil:
		return true
	}
	switch out.class {
	case upstream.Canceled:
		return true
	case upstream.RequestFault:
		_, tooLong := upstream.TooLong(out.err)
		return !tooLong || toolCalls
	}
	return toolCalls
}

// call makes one attempt on candidate c, admitted by the gate, and reports
// its outcome to the gate. Two failures are fixed by a second call at once,
// which is not a failure of the provider unless it fails too: a key the
// provider refuses is replaced by the next one, and a refused prefill by
// prompt mode for the rest of the request.
func (j *job) call(ctx context.Context, c *provider.Candidate, seam wire.Seam) outcome {
	k := &callKey{keys: j.w.keys[c.Provider.Name]}
	k.key = k.keys.Key()
	for {
		ticket, refused := j.w.admit(ctx, c)
		if refused != nil {
			return *refused
		}
		tokens, received := j.tokens(), j.received
		var out outcome
		j.attempt(withTicket(ctx, ticket), c, k.key, seam, &out)
		used := callUsed{tokens: j.tokens() - tokens, streamed: j.received > received}
		if j.callAgain(ticket, c, k, &seam, &out, used) {
			continue
		}
		j.reportCall(ctx, ticket, c, k.key, &out, used)
		return out
	}
}

// callKey is the API key a call uses, from its provider's keys; rekeyed
// once it replaced a key the provider refused.
type callKey struct {
	keys    *apikeys.Ring
	key     string
	rekeyed bool
}

// callAgain reports whether the attempt on c that ended with out is one
// call fixes at once: a refused key, replaced in k by the next one (once a
// call, the next attempt then marked as a retry in seam), or a refused
// prefill, after which the request goes on in prompt mode. It then
// settles the attempt's ticket.
func (j *job) callAgain(ticket fleet.Ticket, c *provider.Candidate, k *callKey, seam *wire.Seam, out *outcome, used callUsed) bool {
	if out.class == upstream.Credential && out.logErr == nil && !k.rekeyed {
		if next, ok := k.keys.Reject(k.key); ok && next != k.key {
			j.log.Info("api key refused; retrying with the next", "provider", c.Provider.Name, "attempt", j.attempts)
			ticket.Done(used.report(c, out))
			k.key, k.rekeyed, *seam = next, true, cmp.Or(*seam, wire.SeamRetry)
			return true
		}
	}
	if j.refusedPrefill(c, out) {
		j.log.Info("prefill refused; continuing in prompt mode", "provider", c.Provider.Name, "attempt", j.attempts)
		j.promptMode = true
		ticket.Done(used.report(c, out))
		return true
	}
	return false
}

// callUsed is what an attempt used of its provider: the tokens it reported
// and whether it streamed anything.
type callUsed struct {
	tokens   int
	streamed bool
}

// report is the gate's report of an attempt on c that ended with out, as
// a neutral verdict.
func (u callUsed) report(c *provider.Candidate, out *outcome) fleet.Report {
	return fleet.Report{Provider: c.Provider.Name, Model: c.Model, Class: out.class, Err: out.err, RetryAfter: out.retryAfter, Verdict: breaker.Neutral,
		Tokens: u.tokens, Streamed: u.streamed, TTFT: out.ttft}
}

// reportCall reports the attempt on c with key that ended with out to its
// ticket, with the verdict out says, and a key that served as good.
func (j *job) reportCall(ctx context.Context, ticket fleet.Ticket, c *provider.Candidate, key string, out *outcome, used callUsed) {
	report := used.report(c, out)
	report.Verdict = out.verdict(ctx)
	if out.hedge != nil {
		report = j.hedgeWon(ctx, out.hedge, report)
	}
	if report.Verdict == breaker.Success {
		j.w.keys[c.Provider.Name].Accept(key)
	}
	ticket.Done(report)
}

// refusedPrefill reports whether out is a provider's 400 to a prefill
// continuation: providers without prefill support answer so.
func (j *job) refusedPrefill(c *provider.Candidate, out *outcome) bool {
	if j.promptMode || c.Continuation != provider.Prefill || j.text.Len() == 0 || out.class != upstream.RequestFault {
		return false
	}
	se := (*upstream.StatusError)(nil)
	return errors.As(out.err, &se) && se.Status == http.StatusBadRequest
}

// verdict is what out says about the provider's health.
func (out outcome) verdict(ctx context.Context) breaker.Verdict {
	switch {
	case out.logErr != nil, ctx.Err() != nil:
		return breaker.Neutral
	case out.err == nil:
		return breaker.Success
	}
	switch out.class {
	case upstream.Canceled, upstream.RequestFault:
		return breaker.Neutral
	}
	return breaker.Failure
}
