package worker

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/relaydev/relay/relay/dialect/chat"
	"github.com/relaydev/relay/relay/fleet"
	"github.com/relaydev/relay/relay/fleet/breaker"
	"github.com/relaydev/relay/relay/provider"
	"github.com/relaydev/relay/relay/upstream"
	"github.com/relaydev/relay/relay/wire"
)

// leg is one upstream call of an attempt: the attempt's own call, or the
// hedge started beside it. The race (open) is the only place two legs
// run at once, each on a goroutine of its own until it sends itself on
// the race's channel; from then on, the attempt's goroutine owns it.
type leg struct {
	// c is the route's candidate, shared with the job: read, never
	// written.
	c    *provider.Candidate
	key  string
	seam wire.Seam
	n    int // the call's attempt number (wire.Frame.Attempt)
	cont continuation
	body []byte
	ob   *attemptObs
	// ticket is a hedge's own admission (the attempt's own call reports on
	// its caller's); started tells the admission that the stream opened.
	ticket  fleet.Ticket
	started func()
	cancel  context.CancelFunc
	stream  *upstream.Stream
	// early holds what the call sent up to its first token, read ahead
	// during the race; end is io.EOF when the answer ended among them.
	early []chat.Delta
	end   error
	// err is why the call ended before its first token; failure is err
	// unless the race or the job stopped the call.
	err, failure error
	// tokens is what a losing call reported using.
	tokens int
	// rival is, on a hedge that won, the attempt's own call it beat.
	rival *leg
}

// open starts first, the attempt's own call, and returns the call whose
// answer the attempt streams. Without a hedge plan that is first, opened.
// With one, first reads ahead to its first token; if the delay passes
// before it, a hedge starts beside it, and the first of the two to produce
// a token (or finish an answer without one) is returned; the other is
// cancelled and counted, and nothing of it is ever published. A call that
// fails before its first token leaves the other to go on alone; if every
// call failed, the error is first's.
func (j *job) open(ctx context.Context, first *leg) (*leg, error) {
	plan, ok := hedgePlanOf(ctx)
	if !ok {
		j.w.aside(func() { first.dial(ctx, j) })
		return first, first.err
	}
	done := make(chan *leg, 2)
	j.w.hedges.call(j.req.Model, plan.cfg.Budget)
	first.run(ctx, j, done)
	timer := time.NewTimer(plan.delay)
	defer timer.Stop()
	legs, running := []*leg{first}, 1
	for {
		select {
		case l := <-done:
			running--
			if l.err == nil {
				j.settle(ctx, legs, l, done, running)
				if len(legs) > 1 {
					j.log.Info("first token won the race; the other call is cancelled", "provider", l.c.Provider.Name, "model", l.c.Model,
						"attempt", l.n, "hedge", l != first)
				}
				return l, nil
			}
			if running == 0 {
				j.settle(ctx, legs, first, done, 0)
				first.close()
				return first, first.err
			}
		case <-timer.C:
			if h := j.hedge(ctx, plan, first); h != nil {
				legs, running = append(legs, h), running+1
				h.run(ctx, j, done)
			}
		}
	}
}

// hedge prepares the hedge of first, if the worker's hedge budget and the
// gate allow it, and nil if not. The budget is asked first and charged
// only once the gate admitted the call.
func (j *job) hedge(ctx context.Context, p hedgePlan, first *leg) *leg {
	log := j.log.With("provider", first.c.Provider.Name, "model", first.c.Model, "hedge_provider", p.c.Provider.Name, "hedge_model", p.c.Model)
	if !j.w.hedges.allows(j.req.Model, p.cfg.Budget) {
		log.Info("first token late; the hedge budget is spent")
		return nil
	}
	ticket, refused := j.w.admit(fleet.WithCallInfo(ctx, p.info), p.c)
	if refused != nil {
		log.Info("first token late; the gate refused the hedge", "err", refused.err)
		return nil
	}
	l := &leg{c: p.c, key: j.w.keys[p.c.Provider.Name].Key(), seam: wire.SeamFallback, cont: j.continuation(p.c), ticket: ticket}
	body, err := upstreamBody(j.req.Body, p.c.Model, l.cont)
	if err != nil || !j.w.hedges.hedge(j.req.Model, p.cfg.Budget) {
		// Not made: the ticket settles at nothing.
		ticket.Done(fleet.Report{Provider: p.c.Provider.Name, Model: p.c.Model, Verdict: breaker.Neutral})
		return nil
	}
	l.body = body
	if st, ok := ticket.(fleet.StartedTicket); ok {
		l.started = st.Started
	}
	j.attempts++
	l.n = j.attempts
	l.ob = j.observe(p.c, l.seam)
	log.Info("first token late; hedging", "attempt", l.n)
	return l
}

// run starts l on a goroutine of its own: it opens the stream and reads
// ahead to the first token, then sends l on done.
func (l *leg) run(ctx context.Context, j *job, done chan<- *leg) {
	ctx, l.cancel = context.WithCancel(ctx)
	go func() {
		l.dial(ctx, j)
		for l.err == nil {
			d, err := l.stream.Next()
			if errors.Is(err, io.EOF) {
				l.end = err
				break
			}
			if err != nil {
				l.err = err
				break
			}
			l.early = append(l.early, d)
			if d.HasContent() {
				break
			}
		}
		if l.err != nil && ctx.Err() == nil {
			l.failure = l.err
		}
		done <- l
	}()
}

// dial opens l's stream.
func (l *leg) dial(ctx context.Context, j *job) {
	client := *j.w.upstream
	client.FirstByteTimeout, client.StallTimeout = l.c.Provider.FirstTokenBound(), l.c.Provider.StallBound()
	client.ContentStallTimeout = l.c.Provider.ContentStallBound()
	l.stream, l.err = client.Stream(ctx, j.target(l.c, l.key), l.body)
	if l.err == nil && l.started != nil {
		l.started()
	}
}

// settle ends every leg but keep once the race is decided: it stops those
// still running (running of them), waits for them, and counts what each
// cost. A hedge's ticket hears its verdict here: neutral for a call the
// race stopped, a failure for one that failed on its own. The attempt's
// own call reports through its caller (hedgeWon).
func (j *job) settle(ctx context.Context, legs []*leg, keep *leg, done <-chan *leg, running int) {
	for _, l := range legs {
		if l != keep {
			l.cancel()
		}
	}
	for ; running > 0; running-- {
		<-done
	}
	for _, l := range legs {
		if l == keep {
			continue
		}
		l.close()
		j.countLost(l, keep)
		if l.ticket != nil {
			l.ticket.Done(l.report(ctx))
		}
		if l == legs[0] {
			keep.rival = l
		}
	}
}

// countLost adds what a losing call reported using to the stream's usage,
// cost and metrics, as for any call, and leaves it out of the metrics of
// keep, the call whose observation is still running.
func (j *job) countLost(l, keep *leg) {
	var prompt, completion int
	var cost float64
	for _, d := range l.early {
		if u := d.Usage; u != nil {
			j.addUsage(u, l.c.Price)
			prompt, completion, l.tokens = prompt+u.PromptTokens, completion+u.CompletionTokens, l.tokens+u.TotalTokens
			cost += l.c.Price.Cost(u.PromptTokens, u.CompletionTokens)
		}
	}
	j.w.metrics.Usage(l.c.Provider.Name, l.c.Model, j.req.Tenant, prompt, completion, cost)
	keep.ob.usage.PromptTokens += prompt
	keep.ob.usage.CompletionTokens += completion
	keep.ob.cost += cost
}

// report is the gate's report of a call that lost the race.
func (l *leg) report(ctx context.Context) fleet.Report {
	r := fleet.Report{Provider: l.c.Provider.Name, Model: l.c.Model, Verdict: breaker.Neutral, Tokens: l.tokens}
	if l.failure != nil {
		out := failed(l.failure)
		r.Class, r.Err, r.RetryAfter, r.Verdict = out.class, out.err, out.retryAfter, out.verdict(ctx)
	}
	return r
}

// hedgeWon reports report, the outcome of an attempt a hedge answered, on
// the hedge's ticket, and returns the report of the call it beat, for the
// attempt's own ticket. A hedge only wins once its stream opened, so the
// failures its caller fixes by calling again (a refused key or prefill)
// are never its.
func (j *job) hedgeWon(ctx context.Context, h *leg, report fleet.Report) fleet.Report {
	report.Provider, report.Model = h.c.Provider.Name, h.c.Model
	if h.rival != nil {
		report.Tokens -= h.rival.tokens
	}
	if report.Verdict == breaker.Success {
		j.w.keys[h.c.Provider.Name].Accept(h.key)
	}
	h.ticket.Done(report)
	if h.rival == nil {
		return fleet.Report{Verdict: breaker.Neutral}
	}
	return h.rival.report(ctx)
}

// close stops l's call and releases its stream.
func (l *leg) close() {
	if l.cancel != nil {
		l.cancel()
	}
	if l.stream != nil {
		l.stream.Close()
	}
}

// next reads the next delta into d: what the race read ahead, then the
// rest of the stream.
func (l *leg) next(d *chat.Delta) error {
	if len(l.early) > 0 {
		l.takeEarly(d)
		return nil
	}
	if l.end != nil {
		return l.end
	}
	return l.stream.NextInto(d)
}

// takeEarly moves the first delta read ahead into d.
func (l *leg) takeEarly(d *chat.Delta) {
	*d = l.early[0]
	l.early = l.early[1:]
}

// FinishReason and StopSequence are the stream's.
func (l *leg) FinishReason() string { return l.stream.FinishReason() }
func (l *leg) StopSequence() string { return l.stream.StopSequence() }
