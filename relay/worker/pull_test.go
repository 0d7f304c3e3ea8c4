package worker

import (
	"context"
	"log/slog"
	"slices"
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

// While the connection is down, a slot sends no pull, and tries again
// after a backoff that grows to its cap; it stops at once when pulling
// ends, also in the middle of a wait.
func TestSlotBacksOffWhileDisconnected(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		logs := &logStore{}
		w := &Worker{
			nc:        &nats.Conn{}, // never connected
			pulls:     make(chan struct{}, maxWaitingPulls),
			pullRetry: pullRetry,
			logger:    slog.New(&recorder{inner: slog.DiscardHandler, store: logs}),
		}
		// The longest delays the backoff can draw: just under its ceilings.
		w.pullRetry.Rand = func(n int64) int64 { return n - 1 }
		pulling, stop := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			w.slot(context.Background(), pulling, noPulls{t: t})
		}()
		// Failed pulls at 0, 1s, 3s and 5s (less a nanosecond a wait).
		time.Sleep(6 * time.Second)
		synctest.Wait()
		var got []string
		logs.find(func(l map[string]string) bool {
			if l["msg"] == "pull failed" {
				got = append(got, l["retry_in"])
			}
			return false
		})
		want := []string{"999.999999ms", "1.999999999s", "1.999999999s", "1.999999999s"}
		if !slices.Equal(got, want) {
			t.Fatalf("pulls failed and waited %v, want %v", got, want)
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
