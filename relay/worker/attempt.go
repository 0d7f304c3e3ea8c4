package worker

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/relaydev/relay/relay/dialect/chat"
	"github.com/relaydev/relay/relay/provider"
	"github.com/relaydev/relay/relay/upstream"
	"github.com/relaydev/relay/relay/wire"
)

// attempt makes one upstream call of candidate c with key, streams its
// answer into the chunk log after what the stream already holds, and says
// in out how it ended. If the stream holds text, the call asks the
// provider to continue it, and a repeat of that text at the start of the
// answer is stripped. seam marks the attempt's first chunk.
func (j *job) attempt(ctx context.Context, c *provider.Candidate, key string, seam wire.Seam, out *outcome) {
	a := j.openAttempt(ctx, c, key, seam, out)
	if a == nil {
		return
	}
	j.endAttempt(a, j.read(a.l, a.pub, a.l.c.Price, a.overlap), out)
}

// liveAttempt is an attempt whose call is open and whose answer is being
// read.
type liveAttempt struct {
	// first is the attempt's own call; l the call whose answer is read,
	// first or the hedge that beat it.
	first, l *leg
	pub      *publisher
	overlap  *overlapFilter
	// traced ends the attempt's span.
	traced func(outcome)
	// tokens and received are the job's at the start of the call: what
	// the call reported and received is the difference at its end.
	tokens, received int
}

// openAttempt opens the call of an attempt (see attempt) and starts
// publishing what it reads; with a nil *liveAttempt, the attempt ended
// before, as it set in out.
func (j *job) openAttempt(ctx context.Context, c *provider.Candidate, key string, seam wire.Seam, out *outcome) *liveAttempt {
	j.attempts++
	j.provider, j.model = c.Provider.Name, c.Model
	ctx, traced := j.traceAttempt(ctx, c, seam)
	first := &leg{c: c, key: key, seam: seam, n: j.attempts, ob: j.observe(c, seam), cont: j.continuation(c),
		started: func() { callStarted(ctx) }}
	body, err := upstreamBody(j.req.Body, c.Model, first.cont)
	if err != nil {
		*out = refused(err)
		traced(*out)
		return nil
	}
	first.body = body
	// The call may be raced by a hedge (hedge_race.go): what follows
	// streams the answer of the call that won.
	l, err := j.open(ctx, first)
	if err != nil {
		*out = failed(err)
		traced(*out)
		return nil
	}
	c = l.c
	j.provider, j.model = c.Provider.Name, c.Model
	a := &liveAttempt{first: first, l: l, traced: traced, tokens: j.tokens(), received: j.received}
	a.pub = newPublisher(j.writer, wire.Frame{Provider: c.Provider.Name, Model: c.Model, Attempt: l.n}, l.seam)
	a.pub.callStart = l.ob.start
	// Nothing is published before the job's claim is stored; a failed
	// claim (or a stream cancelled before the job) drops it all. The
	// chunk log outlives the call: what was received before a
	// cancellation or a handover is still published. If publishing fails,
	// nobody will see the rest of this answer: the call stops, not to pay
	// for it.
	a.pub.start(j.logCtx, j.firstClaim, j.w.runners, l.close)
	if l.cont.text != "" && l.cont.mode == provider.Prompt {
		a.overlap = newOverlapFilter(l.cont.text)
	}
	return a
}

// endAttempt waits for the attempt's chunks to be published, closes its
// call and says in out how it ended; readErr is what read returned.
func (j *job) endAttempt(a *liveAttempt, readErr error, out *outcome) {
	l := a.l
	a.pub.close()
	logErr := <-a.pub.done
	j.chunks += a.pub.chunks
	j.model = a.pub.model
	if n := j.received - a.received; n > 0 && j.tokens() == a.tokens {
		// The call ended (cut, stalled, or from a provider that never
		// says) without reporting its usage: what it generated is
		// counted from its deltas, a token each, and paid for. Its
		// prompt is not known.
		j.addUsage(&chat.Usage{CompletionTokens: n, TotalTokens: n}, l.c.Price)
	}
	ttft := l.ob.done(a.pub)
	if a.overlap != nil && a.overlap.stripped > 0 {
		j.log.Info("stripped a repeat at the seam", "provider", l.c.Provider.Name, "attempt", j.attempts, "bytes", a.overlap.stripped)
	}
	switch {
	case logErr != nil:
		*out = outcome{logErr: logErr}
	case readErr != nil:
		*out = failed(readErr)
	default:
		*out = outcome{finishReason: l.FinishReason(), stopSequence: l.StopSequence()}
	}
	out.ttft = ttft
	if l != a.first {
		out.hedge = l
	}
	l.close()
	a.traced(*out)
}

// continuation says what attempts on c continue: the stream's text, in c's
// mode unless a provider refused a prefill earlier in the request.
func (j *job) continuation(c *provider.Candidate) continuation {
	mode := c.Continuation
	if j.promptMode {
		mode = provider.Prompt
	}
	return continuation{text: j.text.String(), tokens: j.tokensOut, mode: mode, prompt: c.ContinuePrompt}
}

// read hands the stream's deltas to pub until the stream ends, through the
// overlap filter. It returns nil only when the provider finished the
// answer with a finish reason.
func (j *job) read(stream answer, pub *publisher, price provider.Price, overlap *overlapFilter) error {
	d := new(chat.Delta)
	for {
		if err := stream.next(d); err != nil {
			return j.readEnd(stream, pub, overlap, err)
		}
		if err := j.take(pub, d, price, overlap); err != nil {
			return err
		}
	}
}

// readEnd is read's result once stream.Next failed with err, io.EOF
// included.
func (j *job) readEnd(stream answer, pub *publisher, overlap *overlapFilter, err error) error {
	// What the filter held is new text, to be kept whatever happens next.
	if perr := j.publish(pub, &chat.Delta{Content: overlap.flush()}); perr != nil {
		return perr
	}
	if !errors.Is(err, io.EOF) {
		return err
	}
	if stream.FinishReason() == "" {
		// A provider may send [DONE] without ever giving a finish reason;
		// such an answer may be cut and is never done.
		return fmt.Errorf("worker: %w: end of stream without a finish reason", upstream.ErrTruncated)
	}
	return nil
}

// take counts what d used and publishes it through the overlap filter.
func (j *job) take(pub *publisher, d *chat.Delta, price provider.Price, overlap *overlapFilter) error {
	j.addUsage(d.Usage, price)
	if d.HasContent() {
		j.received++
	}
	in, held := d.Content, overlap.holding()
	d.Content = overlap.feed(d.Content)
	if len(d.ToolCalls) > 0 {
		// A tool call follows its text, so the text is released.
		d.Content += overlap.flush()
	}
	if len(d.Logprobs) > 0 && (held || d.Content != in) {
		// The filter cut, held or released held text with this delta:
		// its logprobs no longer describe its text. They are dropped, and
		// the chunk says so.
		d.Logprobs = nil
		pub.markLogprobsGap()
	}
	return j.publish(pub, d)
}

// answer is the stream of one call's answer, as read ahead by a race
// (leg). next reads the next delta into d; it fails with io.EOF at the
// end of the answer.
type answer interface {
	next(d *chat.Delta) error
	FinishReason() string
}

// publish queues d and records what the stream now holds.
func (j *job) publish(pub *publisher, d *chat.Delta) error {
	if err := pub.add(d); err != nil {
		return err
	}
	j.text.WriteString(d.Content)
	if d.Content != "" {
		j.tokensOut++
	}
	j.toolCalls = j.toolCalls || len(d.ToolCalls) > 0
	return nil
}

// addUsage sums the usage of every attempt, each call being paid for, its
// details by name, and prices it by the model that was called.
func (j *job) addUsage(u *chat.Usage, price provider.Price) {
	if u == nil {
		return
	}
	if j.usage == nil {
		j.usage = &wire.Usage{}
	}
	j.usage.PromptTokens += u.PromptTokens
	j.usage.CompletionTokens += u.CompletionTokens
	j.usage.TotalTokens += u.TotalTokens
	j.usage.PromptTokensDetails = j.usage.PromptTokensDetails.Add(u.PromptTokensDetails)
	j.usage.CompletionTokensDetails = j.usage.CompletionTokensDetails.Add(u.CompletionTokensDetails)
	j.usage.ServerToolUse = j.usage.ServerToolUse.Add(u.ServerToolUse)
	j.cost += price.Cost(u.PromptTokens, u.CompletionTokens)
}
