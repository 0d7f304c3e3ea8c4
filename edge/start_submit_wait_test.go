package edge

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// TestRetryLeaderlessWaitsUpToSubmitWait: a request whose writes find no
// leader waits for one for submitWait, then fails with the last error
// (the tries themselves: streams.TestRetryLeaderlessWaitsOutAnElection).
func TestRetryLeaderlessWaitsUpToSubmitWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), submitWait)
		defer cancel()
		start := time.Now()
		tries := 0
		err := retryLeaderless(ctx, func(context.Context) error {
			tries++
			return jetstream.ErrNoStreamResponse
		})
		if !errors.Is(err, jetstream.ErrNoStreamResponse) || time.Since(start) < submitWait || tries < 10 {
			t.Fatalf("a leader never elected: %v after %v and %d tries, want the last error after %v", err, time.Since(start), tries, submitWait)
		}
	})
}
