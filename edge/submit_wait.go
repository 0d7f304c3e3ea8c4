package edge

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/relay/backoff"
)

// # A request waits out an election
//
// When a node of a replicated cluster dies, the streams and buckets it
// led have no leader until the others elect one: 4 to 9 s, which nobody
// can shorten. A request the edge answered with a 503 meanwhile would
// fail where calling the provider directly would not, since an SDK's
// retries (two, about a second apart, for OpenAI's) are spent before the
// election ends. So the edge keeps writing a new request's idempotency
// record, its metadata and its queue message (and looking up their
// buckets, which asks their leaders), with backoff, for up to submitWait;
// the client sees a slower first token, not an error. Only a failure that
// a retry cannot mend (the storage full, a write refused) ends it at once,
// and so does the client leaving. Each try is bounded by natsTimeout, so a
// write that is lost without an answer is tried again rather than waited
// for.

// submitWait bounds how long a new request waits for the writes that
// accept it, across an election (see above).
const submitWait = 15 * time.Second

// submitRetry spaces the tries of a write that failed for want of a
// leader.
var submitRetry = backoff.Backoff{Config: backoff.Config{Base: 100 * time.Millisecond, Cap: time.Second}}

// retryLeaderless runs op (a write, or the lookup of a bucket before one)
// until it succeeds, fails for good, or ctx (the request's, bounded by
// submitWait) ends; it returns the last error.
func retryLeaderless(ctx context.Context, op func(ctx context.Context) error) error {
	for try := 0; ; try++ {
		tctx, cancel := context.WithTimeout(ctx, natsTimeout)
		err := op(tctx)
		cancel()
		if err == nil || !leaderless(ctx, err) {
			return err
		}
		if submitRetry.Sleep(ctx, submitRetry.Delay(try, 0)) != nil {
			return err
		}
	}
}

// codeClusterNotAvailable is JetStream's "temporarily unavailable". Its
// other 503s (the storage full, insufficient resources, JetStream not
// enabled) do not pass with a retry.
const codeClusterNotAvailable = 10008

// leaderless reports whether err is what an operation gets while its stream
// has no leader, or its server is out of reach: no answer, no one to
// answer, or JetStream's "temporarily unavailable", while the caller still
// waits.
func leaderless(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		return apiErr.ErrorCode == codeClusterNotAvailable
	}
	return errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrNoResponders) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout)
}
