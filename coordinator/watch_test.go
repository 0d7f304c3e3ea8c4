package coordinator

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

// A liveness watcher that cannot start is started again after a backoff
// that grows to its cap, until ctx ends, also during a wait.
func TestLivenessWatcherStartsAgainWithBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := watchRetry
		// The longest delays the backoff can draw: just under its ceilings.
		b.Rand = func(n int64) int64 { return n - 1 }
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		start := time.Now()
		var starts []time.Duration
		done := make(chan struct{})
		go func() {
			defer close(done)
			rewatch(ctx, b, slog.New(slog.DiscardHandler), func(context.Context) error {
				starts = append(starts, time.Since(start))
				return errors.New("nats: no responders")
			})
		}()
		time.Sleep(12 * time.Second)
		synctest.Wait()
		var want []time.Duration
		for n, at := 0, time.Duration(0); at <= 12*time.Second; n++ {
			want = append(want, at)
			at += b.Ceiling(n) - 1
		}
		// 0, 1s, 3s, 7s, 11s (less a nanosecond a wait).
		if len(want) != 5 || !slices.Equal(starts, want) {
			t.Fatalf("started at %v, want %v", starts, want)
		}
		// Cancelled in the middle of a wait, it returns at once.
		cancel()
		synctest.Wait()
		select {
		case <-done:
		default:
			t.Fatal("still waiting to start the watcher after ctx ended")
		}
		if len(starts) != 5 {
			t.Fatalf("started again after ctx ended: %v", starts)
		}
	})
}
