package region_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/relaydev/relay/relay/natsconn"
	"github.com/relaydev/relay/relay/region"
	"github.com/relaydev/relay/relay/relaytest"
	"github.com/relaydev/relay/relay/streams"
)

// restarts records the delays of the reconciliation restarts logged.
type restarts struct {
	mu     sync.Mutex
	delays []time.Duration
}

func (r *restarts) Enabled(context.Context, slog.Level) bool { return true }
func (r *restarts) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *restarts) WithGroup(string) slog.Handler            { return r }
func (r *restarts) Handle(_ context.Context, rec slog.Record) error {
	if rec.Message != "overlay reconciliation stopped; starting it again" {
		return nil
	}
	rec.Attrs(func(a slog.Attr) bool {
		if a.Key == "in" {
			r.mu.Lock()
			r.delays = append(r.delays, a.Value.Duration())
			r.mu.Unlock()
		}
		return true
	})
	return nil
}

func (r *restarts) seen() []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]time.Duration(nil), r.delays...)
}

// A reconciliation that cannot start (the region's buckets are not set up
// yet) starts again after a jittered backoff below 4 intervals, until ctx
// ends.
func TestReconciliationStartsAgainWithBackoff(t *testing.T) {
	r := relaytest.TwoRegions(t)
	_, js, err := natsconn.Connect(natsconn.Config{URL: r.B.ClientURL()}, t.Name(), relaytest.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer js.Conn().Close()
	log := &restarts{}
	g, err := region.NewRegional(js, streams.Topology{}, regionB, slog.New(log))
	if err != nil {
		t.Fatal(err)
	}
	const interval = 10 * time.Millisecond
	g.ReconcileInterval = interval
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	relaytest.Eventually(t, 10*time.Second, 5*time.Millisecond, func() bool { return len(log.seen()) >= 40 })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	delays := log.seen()
	distinct := map[time.Duration]bool{}
	for _, d := range delays {
		if d < 0 || d >= 4*interval {
			t.Fatalf("restart after %v, want below %v: %v", d, 4*interval, delays)
		}
		distinct[d] = true
	}
	if len(distinct) < len(delays)/2 {
		t.Fatalf("restart delays %v: not jittered", delays)
	}
}
