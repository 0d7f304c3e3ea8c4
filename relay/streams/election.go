package streams

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/relay/backoff"
)

// # Waiting out an election
//
// When a node of a replicated cluster dies, the streams and buckets it
// led have no leader until the others elect one: 4 to 9 s, which nobody
// can shorten. A write made meanwhile gets no answer, or JetStream's
// "temporarily unavailable", and so does the lookup of a bucket, which
// asks its leader. Such a write is worth trying again, with backoff,
// where one refused for good (the storage full, a bucket that does not
// exist) is not: RetryLeaderless tells them apart with Leaderless.

// codeClusterNotAvailable is JetStream's "temporarily unavailable". Its
// other 503s (the storage full, insufficient resources, JetStream not
// enabled) do not pass with a retry.
const codeClusterNotAvailable = 10008

// Leaderless reports whether err is what an operation gets while its
// stream has no leader, or its server is out of reach: no answer, no one
// to answer, or JetStream's "temporarily unavailable", while the caller
// (ctx) still waits.
func Leaderless(ctx context.Context, err error) bool {
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

// RetryLeaderless runs op, each try bounded by try, until it succeeds,
// fails other than Leaderless, or ctx ends; tries are spaced by spacing.
// It returns the last error. A try that timed out may have been stored:
// op must be safe to repeat (a create that finds its own key, a publish
// deduplicated by its Nats-Msg-Id).
func RetryLeaderless(ctx context.Context, spacing backoff.Backoff, try time.Duration, op func(ctx context.Context) error) error {
	for n := 0; ; n++ {
		tctx, cancel := context.WithTimeout(ctx, try)
		err := op(tctx)
		cancel()
		if err == nil || !Leaderless(ctx, err) {
			return err
		}
		if spacing.Sleep(ctx, spacing.Delay(n, 0)) != nil {
			return err
		}
	}
}
