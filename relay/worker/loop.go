package worker

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"time"

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

// serve is the attempt loop. It calls the candidates of the request's
// route (see routeState) until an attempt finishes the answer, one fails in
// a way no other attempt can fix (the request's own fault, a cut answer
// that holds tool calls, a lost stream, a shutdown), or the budgets are
// spent. Every attempt after the first continues the text already
// published, so the client sees one answer. takeover says that the text
// was published by an earlier worker.
func (j *job) serve(ctx context.Context, takeover bool) outcome {
	if j.toolCalls {
		return refused(errNoToolCallContinuation)
	}
	route := j.w.route(j.req)
	if len(route) == 0 {
		return refused(modelNotServed(j.req.Model))
	}
	state := newRouteState(route)
	var seam wire.Seam
	if takeover {
		seam = wire.SeamTakeover
	}
	limit, limited := tokenLimit(j.req.Body)
	i := 0
	// Whichever way the loop ends, the stream ended on candidate i.
	defer func() { j.routed = &routed{first: route[0], last: route[i]} }()
	for {
		if limited && j.tokensOut >= limit {
			// The answer has every token the client allowed: a provider
			// would have stopped here with the same reason.
			return outcome{finishReason: "length"}
		}
		c := route[i]
		before := j.text.Len()
		out := j.call(j.withHedge(fleet.WithCallInfo(ctx, j.callInfo(state, i, takeover)), state, i, takeover), c, seam)
		if out.final(ctx, j.toolCalls) {
			if j.toolCalls && out.err != nil && out.class == upstream.Transient {
				out.err = chain(errNoToolCallContinuation, out.err)
			}
			return out
		}
		switch {
		case errors.Is(out.err, fleet.ErrProviderUnavailable):
			state.close(i)
		case out.class == upstream.Credential:
			// Every key of the provider was refused.
			state.closeProvider(c.Provider.Name)
		default:
			state.failed(i, j.text.Len() > before, out.retryAfter)
			if out.retryAfter > maxRetryAfter {
				state.close(i)
			}
		}
		next, ok := state.next(i)
		if !ok {
			if out.class == upstream.Transient && !errors.Is(out.err, fleet.ErrProviderUnavailable) && out.retryAfter <= maxRetryAfter {
				out.err = chain(errRetriesExhausted, out.err)
			}
			j.log.Info("attempt failed; giving up", "provider", c.Provider.Name, "model", c.Model, "attempt", j.attempts, "class", out.class, "err", out.err)
			return out
		}
		if next != i {
			j.log.Info("attempt failed; falling back", "provider", c.Provider.Name, "model", c.Model, "attempt", j.attempts,
				"class", out.class, "err", out.err, "next_provider", route[next].Provider.Name, "next_model", route[next].Model)
			i, seam = next, wire.SeamFallback
			continue
		}
		b := backoff.Backoff{Config: c.Provider.Retry}
		delay := b.Delay(state.streak-1, out.retryAfter)
		j.log.Info("attempt failed; retrying", "provider", c.Provider.Name, "model", c.Model, "attempt", j.attempts,
			"class", out.class, "err", out.err, "delay", delay)
		if err := b.Sleep(ctx, delay); err != nil {
			return outcome{err: err, class: upstream.Canceled}
		}
		seam = wire.SeamRetry
		if j.text.Len() > 0 {
			seam = wire.SeamContinuation
		}
	}
}

// final reports whether no other attempt can change out: the answer is
// finished, the stream lost or the job stopping, the request at fault, or
// the cut answer holds tool calls.
func (out outcome) final(ctx context.Context, toolCalls bool) bool {
	switch {
	case out.err == nil, out.logErr != nil, ctx.Err() != nil:
		return true
	}
	switch out.class {
	case upstream.Canceled, upstream.RequestFault:
		return true
	}
	return toolCalls
}

// call makes one attempt on candidate c, admitted by the gate, and reports
// its outcome to the gate. Two failures are fixed by a second call at once,
// which is not a failure of the provider unless it fails too: a key the
// provider refuses is replaced by the next one, and a refused prefill by
// prompt mode for the rest of the request.
func (j *job) call(ctx context.Context, c provider.Candidate, seam wire.Seam) outcome {
	keys := j.w.keys[c.Provider.Name]
	key := keys.Key()
	rekeyed := false
	for {
		ticket, refused := j.w.admit(ctx, c)
		if refused != nil {
			return *refused
		}
		tokens, received := j.tokens(), j.received
		out := j.attempt(withTicket(ctx, ticket), c, key, seam)
		report := fleet.Report{Provider: c.Provider.Name, Model: c.Model, Class: out.class, Err: out.err, RetryAfter: out.retryAfter, Verdict: breaker.Neutral,
			Tokens: j.tokens() - tokens, Streamed: j.received > received, TTFT: out.ttft}
		if out.class == upstream.Credential && out.logErr == nil && !rekeyed {
			if next, ok := keys.Reject(key); ok && next != key {
				j.log.Info("api key refused; retrying with the next", "provider", c.Provider.Name, "attempt", j.attempts)
				ticket.Done(report)
				key, rekeyed, seam = next, true, cmp.Or(seam, wire.SeamRetry)
				continue
			}
		}
		if j.refusedPrefill(c, out) {
			j.log.Info("prefill refused; continuing in prompt mode", "provider", c.Provider.Name, "attempt", j.attempts)
			j.promptMode = true
			ticket.Done(report)
			continue
		}
		report.Verdict = out.verdict(ctx)
		if out.hedge != nil {
			report = j.hedgeWon(ctx, out.hedge, report)
		}
		if report.Verdict == breaker.Success {
			keys.Accept(key)
		}
		ticket.Done(report)
		return out
	}
}

// refusedPrefill reports whether out is a provider's 400 to a prefill
// continuation: providers without prefill support answer so.
func (j *job) refusedPrefill(c provider.Candidate, out outcome) bool {
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
