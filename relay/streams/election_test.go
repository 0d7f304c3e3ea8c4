package streams_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/relay/backoff"
	"github.com/relaydev/relay/relay/streams"
)

// TestRetryLeaderlessWaitsOutAnElection: an operation that finds no
// leader is tried again until it succeeds; one refused for good (the
// storage full, a queue at its byte limit, a bucket that does not exist)
// is not; and the wait ends with the caller's context.
func TestRetryLeaderlessWaitsOutAnElection(t *testing.T) {
	spacing := backoff.Backoff{Config: backoff.Config{Base: 100 * time.Millisecond, Cap: time.Second}}
	full := &jetstream.APIError{Code: 500, ErrorCode: 10047, Description: "insufficient storage resources available"}
	// A stream at its byte limit (DiscardNew) refuses with a 503 too.
	maxBytes := &jetstream.APIError{Code: 503, ErrorCode: 10077, Description: "maximum bytes exceeded"}
	noLeader := &jetstream.APIError{Code: 503, ErrorCode: 10008, Description: "JetStream system temporarily unavailable"}
	for _, tc := range []struct {
		name  string
		errs  []error // what each try returns; nil after the last
		tries int
		err   error
		took  time.Duration // at least
	}{
		{"done at once", nil, 1, nil, 0},
		{"no stream answers, then a leader is elected", []error{jetstream.ErrNoStreamResponse, nats.ErrNoResponders, context.DeadlineExceeded, nats.ErrTimeout}, 5, nil, 100 * time.Millisecond},
		{"JetStream unavailable", []error{noLeader}, 2, nil, 0},
		{"storage full", []error{full}, 1, full, 0},
		{"the queue at its byte limit", []error{maxBytes}, 1, maxBytes, 0},
		{"no such bucket", []error{jetstream.ErrBucketNotFound}, 1, jetstream.ErrBucketNotFound, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				tries := 0
				start := time.Now()
				err := streams.RetryLeaderless(t.Context(), spacing, time.Second, func(ctx context.Context) error {
					tries++
					if d, ok := ctx.Deadline(); !ok || d.Sub(time.Now()) > time.Second {
						t.Errorf("try %d not bounded by a second", tries)
					}
					if tries <= len(tc.errs) {
						return tc.errs[tries-1]
					}
					return nil
				})
				if !errors.Is(err, tc.err) || tries != tc.tries {
					t.Fatalf("err %v after %d tries, want %v after %d", err, tries, tc.err, tc.tries)
				}
				if took := time.Since(start); took < tc.took {
					t.Errorf("took %v, want at least %v of backoff", took, tc.took)
				}
			})
		})
	}
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
		defer cancel()
		start := time.Now()
		err := streams.RetryLeaderless(ctx, spacing, time.Second, func(context.Context) error { return jetstream.ErrNoStreamResponse })
		if !errors.Is(err, jetstream.ErrNoStreamResponse) || time.Since(start) < 15*time.Second {
			t.Fatalf("a leader never elected: %v after %v, want the last error after 15s", err, time.Since(start))
		}
	})
}
