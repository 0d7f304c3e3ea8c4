package relay

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/relaydev/relay/relay/protocol"
	"github.com/relaydev/relay/relay/upstream"
)

// attempt makes one upstream call and streams its answer into the chunk
// log after what the stream already holds. prefill is text already
// published, which the provider is asked to continue; seam marks the first
// chunk of this attempt.
func (j *job) attempt(ctx context.Context, prefill string, seam protocol.Seam) outcome {
	j.attempts++
	j.model = j.req.Model
	target, err := chooseTarget(j.w.catalog, j.req.Model)
	if err != nil {
		return refused(err)
	}
	j.provider = target.Provider
	body, err := upstreamBody(j.req.Body, j.req.Model, prefill)
	if err != nil {
		return refused(err)
	}
	stream, err := j.w.upstream.Stream(ctx, target, body)
	if err != nil {
		return outcome{err: err, class: upstream.Classify(err)}
	}
	defer stream.Close()

	pub := newPublisher(j.writer, protocol.Frame{Provider: target.Provider, Model: j.req.Model, Attempt: j.attempts}, seam)
	published := make(chan error, 1)
	go func() {
		err := pub.run(ctx)
		if err != nil {
			// Nobody will see the rest of this answer: stop paying for it.
			stream.Close()
		}
		published <- err
	}()
	readErr := j.read(stream, pub)
	pub.close()
	logErr := <-published
	j.chunks += pub.chunks
	j.model = pub.model
	switch {
	case logErr != nil:
		return outcome{logErr: logErr}
	case readErr != nil:
		return outcome{err: readErr, class: upstream.Classify(readErr)}
	}
	return outcome{finishReason: stream.FinishReason()}
}

// read hands the stream's deltas to pub until the stream ends. It returns
// nil only when the provider finished the answer with a finish reason.
func (j *job) read(stream *upstream.Stream, pub *publisher) error {
	for {
		d, err := stream.Next()
		if errors.Is(err, io.EOF) {
			if stream.FinishReason() == "" {
				// A provider may send [DONE] without ever giving a finish
				// reason; such an answer may be cut and is never done.
				return fmt.Errorf("relay: %w: end of stream without a finish reason", upstream.ErrTruncated)
			}
			return nil
		}
		if err != nil {
			return err
		}
		j.addUsage(d.Usage)
		if err := pub.add(d); err != nil {
			return err
		}
	}
}

// addUsage sums the usage of every attempt: each call is paid for.
func (j *job) addUsage(u *upstream.Usage) {
	if u == nil {
		return
	}
	if j.usage == nil {
		j.usage = &protocol.Usage{}
	}
	j.usage.PromptTokens += u.PromptTokens
	j.usage.CompletionTokens += u.CompletionTokens
	j.usage.TotalTokens += u.TotalTokens
}
