package worker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/relaydev/relay/relay/provider"
	"github.com/relaydev/relay/relay/upstream"
	"github.com/relaydev/relay/relay/wire"
)

// attempt makes one upstream call of candidate c with key, and streams its
// answer into the chunk log after what the stream already holds. If the
// stream holds text, the call asks the provider to continue it, and a
// repeat of that text at the start of the answer is stripped. seam marks
// the attempt's first chunk.
func (j *job) attempt(ctx context.Context, c provider.Candidate, key string, seam wire.Seam) (out outcome) {
	j.attempts++
	j.provider, j.model = c.Provider.Name, c.Model
	ctx, traced := j.traceAttempt(ctx, c, seam)
	defer func() { traced(out) }()
	first := &leg{c: c, key: key, seam: seam, n: j.attempts, ob: j.observe(c, seam), cont: j.continuation(c),
		started: func() { callStarted(ctx) }}
	body, err := upstreamBody(j.req.Body, c.Model, first.cont)
	if err != nil {
		return refused(err)
	}
	first.body = body
	// The call may be raced by a hedge (hedge_race.go): what follows
	// streams the answer of the call that won.
	l, err := j.open(ctx, first)
	if err != nil {
		return failed(err)
	}
	defer l.close()
	var ttft time.Duration
	defer func() {
		out.ttft = ttft
		if l != first {
			out.hedge = l
		}
	}()
	c, cont, ob := l.c, l.cont, l.ob
	j.provider, j.model = c.Provider.Name, c.Model

	pub := newPublisher(j.writer, wire.Frame{Provider: c.Provider.Name, Model: c.Model, Attempt: l.n}, l.seam)
	pub.callStart = ob.start
	published := make(chan error, 1)
	claim := j.firstClaim
	go func() {
		// Nothing is published before the job's claim is stored; a failed
		// claim (or a stream cancelled before the job) drops it all.
		err := claim.wait()
		if err == nil {
			// The chunk log outlives the call: what was received before a
			// cancellation or a handover is still published.
			err = pub.run(j.logCtx)
		}
		if err != nil {
			// Nobody will see the rest of this answer: stop paying for it.
			l.close()
		}
		published <- err
	}()
	var overlap *overlapFilter
	if cont.text != "" && cont.mode == provider.Prompt {
		overlap = newOverlapFilter(cont.text)
	}
	readErr := j.read(l, pub, c.Price, overlap)
	pub.close()
	logErr := <-published
	j.chunks += pub.chunks
	j.model = pub.model
	ttft = ob.done(pub)
	if overlap != nil && overlap.stripped > 0 {
		j.log.Info("stripped a repeat at the seam", "provider", c.Provider.Name, "attempt", j.attempts, "bytes", overlap.stripped)
	}
	switch {
	case logErr != nil:
		return outcome{logErr: logErr}
	case readErr != nil:
		return failed(readErr)
	}
	return outcome{finishReason: l.FinishReason(), stopSequence: l.StopSequence()}
}

// continuation says what attempts on c continue: the stream's text, in c's
// mode unless a provider refused a prefill earlier in the request.
func (j *job) continuation(c provider.Candidate) continuation {
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
	for {
		d, err := stream.Next()
		if err != nil {
			// What the filter held is new text, to be kept whatever
			// happens next.
			if perr := j.publish(pub, upstream.Delta{Content: overlap.flush()}); perr != nil {
				return perr
			}
		}
		if errors.Is(err, io.EOF) {
			if stream.FinishReason() == "" {
				// A provider may send [DONE] without ever giving a finish
				// reason; such an answer may be cut and is never done.
				return fmt.Errorf("worker: %w: end of stream without a finish reason", upstream.ErrTruncated)
			}
			return nil
		}
		if err != nil {
			return err
		}
		j.addUsage(d.Usage, price)
		if hasToken(d) {
			j.received++
		}
		in, held := d.Content, overlap.holding()
		d.Content = overlap.feed(d.Content)
		if len(d.ToolCalls) > 0 {
			// A tool call follows its text, so the text is released.
			d.Content += overlap.flush()
		}
		if len(d.Logprobs) > 0 && (held || d.Content != in) {
			// The filter cut, held or released held text with this
			// delta: its logprobs no longer describe its text. They are
			// dropped, and the chunk says so.
			d.Logprobs = nil
			pub.markLogprobsGap()
		}
		if err := j.publish(pub, d); err != nil {
			return err
		}
	}
}

// answer is the stream of one call's answer, as read ahead by a race
// (leg).
type answer interface {
	Next() (upstream.Delta, error)
	FinishReason() string
}

// publish queues d and records what the stream now holds.
func (j *job) publish(pub *publisher, d upstream.Delta) error {
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
func (j *job) addUsage(u *upstream.Usage, price provider.Price) {
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
