package app

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

var errNoJetStream = errors.New("nats: no responders available for request")

// Setup is tried again after a growing backoff until JetStream answers;
// each try is bounded by setupTimeout.
func TestSetupIsRetriedUntilJetStreamAnswers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := setupRetry
		// The longest delays the backoff can draw: just under its ceilings.
		b.Rand = func(n int64) int64 { return n - 1 }
		start := time.Now()
		var tries []time.Duration
		err := awaitSetup(context.Background(), b, slog.New(slog.DiscardHandler), func(ctx context.Context) error {
			tries = append(tries, time.Since(start))
			if deadline, ok := ctx.Deadline(); !ok || deadline.Sub(time.Now()) != setupTimeout {
				t.Errorf("try without its %v deadline", setupTimeout)
			}
			if len(tries) <= 4 {
				return errNoJetStream
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		// Waits of 0.5s, 1s, 2s and 2s (less a nanosecond each).
		want := []time.Duration{0, 500*time.Millisecond - 1, 1500*time.Millisecond - 2, 3500*time.Millisecond - 3, 5500*time.Millisecond - 4}
		if !slices.Equal(tries, want) {
			t.Fatalf("tried at %v, want %v", tries, want)
		}
	})
}

// A process stopped while it waits for JetStream stops waiting at once.
func TestSetupStopsWaitingWhenCtxEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		start := time.Now()
		err := awaitSetup(ctx, setupRetry, slog.New(slog.DiscardHandler), func(context.Context) error { return errNoJetStream })
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("awaitSetup = %v, want the ctx's deadline", err)
		}
		if waited := time.Since(start); waited != time.Minute {
			t.Fatalf("returned after %v, want 1m", waited)
		}
	})
}
