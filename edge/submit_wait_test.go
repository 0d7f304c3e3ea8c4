package edge

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// TestRetryLeaderlessWaitsOutAnElection: a write that finds no leader is
// tried again until it is stored; one refused for good (the storage full)
// is not; and the wait ends with the request's context.
func TestRetryLeaderlessWaitsOutAnElection(t *testing.T) {
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
		{"stored at once", nil, 1, nil, 0},
		{"no stream answers, then a leader is elected", []error{jetstream.ErrNoStreamResponse, jetstream.ErrNoStreamResponse, context.DeadlineExceeded}, 4, nil, 100 * time.Millisecond},
		{"JetStream unavailable", []error{noLeader}, 2, nil, 0},
		{"storage full", []error{full}, 1, full, 0},
		{"the queue at its byte limit", []error{maxBytes}, 1, maxBytes, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				tries := 0
				start := time.Now()
				err := retryLeaderless(t.Context(), func(context.Context) error {
					tries++
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
		ctx, cancel := context.WithTimeout(t.Context(), submitWait)
		defer cancel()
		start := time.Now()
		err := retryLeaderless(ctx, func(context.Context) error { return jetstream.ErrNoStreamResponse })
		if !errors.Is(err, jetstream.ErrNoStreamResponse) || time.Since(start) < submitWait {
			t.Fatalf("a leader never elected: %v after %v, want the last error after %v", err, time.Since(start), submitWait)
		}
	})
}
