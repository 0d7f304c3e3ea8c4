package worker

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// noPulls is a consumer that fails the test if it is pulled from.
type noPulls struct {
	jetstream.Consumer
	t *testing.T
}

func (c noPulls) Next(...jetstream.FetchOpt) (jetstream.Msg, error) {
	c.t.Error("a pull was sent while disconnected")
	return nil, nats.ErrTimeout
}

// pullLog records when a slot logged a failed pull.
type pullLog struct {
	mu    sync.Mutex
	start time.Time
	at    []time.Duration
}

func (l *pullLog) Enabled(context.Context, slog.Level) bool { return true }
func (l *pullLog) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *pullLog) WithGroup(string) slog.Handler            { return l }
func (l *pullLog) Handle(_ context.Context, r slog.Record) error {
	if r.Message == "pull failed" {
		l.mu.Lock()
		l.at = append(l.at, time.Since(l.start))
		l.mu.Unlock()
	}
	return nil
}

func (l *pullLog) times() []time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]time.Duration(nil), l.at...)
}

// While the connection is down, a slot sends no pull, and tries again
// after a backoff that grows to its cap; it stops at once when pulling
// ends, also in the middle of a wait.
func TestSlotBacksOffWhileDisconnected(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &pullLog{start: time.Now()}
		w := &Worker{
			nc:        &nats.Conn{}, // never connected
			pulls:     make(chan struct{}, maxWaitingPulls),
			pullRetry: pullRetry,
			logger:    slog.New(log),
		}
		// The longest delays the backoff can draw: just under its ceilings.
		w.pullRetry.Rand = func(n int64) int64 { return n - 1 }
		pulling, stop := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			w.slot(context.Background(), pulling, noPulls{t: t})
		}()
		time.Sleep(6 * time.Second)
		synctest.Wait()
		// Waits of 1s, 2s, 2s (less a nanosecond each), then one under way.
		want := []time.Duration{0, time.Second - 1, 3*time.Second - 2, 5*time.Second - 3}
		got := log.times()
		if len(got) != len(want) {
			t.Fatalf("pulls failed at %v, want %v", got, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("pulls failed at %v, want %v", got, want)
			}
		}
		stop()
		synctest.Wait()
		select {
		case <-done:
		default:
			t.Fatal("the slot still waits to pull after pulling ended")
		}
	})
}
