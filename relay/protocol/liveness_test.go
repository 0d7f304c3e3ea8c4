package protocol

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// watchRig runs a livenessWatch in a synctest bubble and records its
// handovers with the bubble's time.
type watchRig struct {
	lw       *livenessWatch
	start    time.Time
	deaf     atomic.Bool // echoes do not come back
	mu       sync.Mutex
	handed   []string        // stream ids, in order
	handedAt []time.Duration // since start
}

func newWatchRig(t *testing.T, self string) *watchRig {
	r := &watchRig{start: time.Now()}
	r.lw = newLivenessWatch(self, func(_ Heartbeat, d Delivery, _ time.Duration) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.handed = append(r.handed, d.StreamID)
		r.handedAt = append(r.handedAt, time.Since(r.start))
	})
	r.lw.ping = func() {
		if !r.deaf.Load() {
			r.lw.echoed()
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.lw.run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return r
}

func (r *watchRig) handovers() ([]string, []time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.handed...), append([]time.Duration(nil), r.handedAt...)
}

func beat(instance string, timeout time.Duration, streams ...string) Heartbeat {
	hb := Heartbeat{Worker: "w-" + instance, Instance: instance, TimeoutMS: timeout.Milliseconds()}
	for i, s := range streams {
		hb.Deliveries = append(hb.Deliveries, Delivery{StreamID: s, Reply: "reply." + s, Seq: uint64(i + 1), Delivered: 1})
	}
	return hb
}

func TestSilentWorkerIsHandedOverAfterItsTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newWatchRig(t, "")
		const timeout = time.Second
		// Worker a beats every 250ms until 1s, then falls silent; worker b
		// keeps beating.
		for range 4 {
			r.lw.observe(beat("a", timeout, "s1", "s2"))
			r.lw.observe(beat("b", timeout, "s3"))
			time.Sleep(250 * time.Millisecond)
		}
		lastA := time.Since(r.start) - 250*time.Millisecond
		for range 8 {
			r.lw.observe(beat("b", timeout, "s3"))
			time.Sleep(250 * time.Millisecond)
		}
		handed, at := r.handovers()
		if len(handed) != 2 || handed[0] == "s3" || handed[1] == "s3" {
			t.Fatalf("handed over %v, want s1 and s2 once each", handed)
		}
		for _, d := range at {
			if late := d - lastA; late <= timeout || late > timeout+watchTick {
				t.Errorf("handed over %v after the last heartbeat, want within (%v, %v]", late, timeout, timeout+watchTick)
			}
		}
	})
}

func TestLeavingWorkerIsForgotten(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newWatchRig(t, "")
		r.lw.observe(beat("a", time.Second, "s1"))
		leaving := beat("a", time.Second)
		leaving.Leaving = true
		r.lw.observe(leaving)
		time.Sleep(5 * time.Second)
		if handed, _ := r.handovers(); len(handed) != 0 {
			t.Fatalf("handed over %v after a leaving heartbeat", handed)
		}
	})
}

func TestWatcherIgnoresItself(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newWatchRig(t, "me")
		r.lw.observe(beat("me", time.Second, "s1"))
		time.Sleep(5 * time.Second)
		if handed, _ := r.handovers(); len(handed) != 0 {
			t.Fatalf("the watcher handed over its own worker's %v", handed)
		}
	})
}

func TestDeafWatcherJudgesNoOne(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newWatchRig(t, "")
		r.lw.observe(beat("a", time.Second, "s1"))
		// The watcher's own messages stop coming back (its connection
		// stalls) just after it heard a: it must not take a for dead.
		r.deaf.Store(true)
		time.Sleep(10 * time.Second)
		if handed, _ := r.handovers(); len(handed) != 0 {
			t.Fatalf("a deaf watcher handed over %v", handed)
		}
		// Once it hears again, a gets a full timeout from then.
		r.deaf.Store(false)
		heard := time.Since(r.start)
		time.Sleep(3 * time.Second)
		handed, at := r.handovers()
		if len(handed) != 1 {
			t.Fatalf("handed over %v, want s1", handed)
		}
		if d := at[0] - heard; d < time.Second {
			t.Fatalf("handed over %v after hearing again, want at least the timeout", d)
		}
	})
}

func TestHeartbeatTimeout(t *testing.T) {
	for _, tc := range []struct {
		ms   int64
		want time.Duration
	}{
		{0, DefaultLivenessTimeout},
		{-5, DefaultLivenessTimeout},
		{1, minLivenessTimeout},
		{2500, 2500 * time.Millisecond},
	} {
		if got := (Heartbeat{TimeoutMS: tc.ms}).Timeout(); got != tc.want {
			t.Errorf("TimeoutMS %d: Timeout() = %v, want %v", tc.ms, got, tc.want)
		}
	}
}

func TestHandoverKeyNamesTheDelivery(t *testing.T) {
	a := Delivery{Seq: 12, Delivered: 1}
	b := Delivery{Seq: 12, Delivered: 2}
	if a.HandoverKey() == b.HandoverKey() || a.HandoverKey() != "12.1" {
		t.Fatalf("keys %q, %q: want one per delivery", a.HandoverKey(), b.HandoverKey())
	}
}
