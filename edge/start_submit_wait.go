package edge

import (
	"context"
	"time"

	"github.com/relaydev/relay/relay/backoff"
	"github.com/relaydev/relay/relay/streams"
)

// # A request waits out an election
//
// A request the edge answered with a 503 while a stream of the cluster
// elects a leader (streams.RetryLeaderless) would fail where calling the
// provider directly would not, since an SDK's retries (two, about a second
// apart, for OpenAI's) are spent before the election ends. So the edge
// keeps writing a new request's idempotency record, its metadata and its
// queue message (and looking up their buckets, which asks their leaders),
// with backoff, for up to submitWait; the client sees a slower first
// token, not an error. Only a failure that a retry cannot mend (the
// storage full, a write refused) ends it at once, and so does the client
// leaving. Each try is bounded by natsTimeout, so a write that is lost
// without an answer is tried again rather than waited for.

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
	return streams.RetryLeaderless(ctx, submitRetry, natsTimeout, op)
}
