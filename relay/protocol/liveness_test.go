package protocol

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// watchRig runs a livenessWatch in a synctest bubble and records its
// handovers with the bubble's time, and its log messages.
type watchRig struct {
	lw       *livenessWatch
	start    time.Time
	deaf     atomic.Bool   // echoes do not come back
	losses   atomic.Uint64 // what lw.losses reports
	mu       sync.Mutex
	handed   []string        // stream ids, in order
	handedAt []time.Duration // since start
	logs     []string
}

func newWatchRig(t *testing.T, self string) *watchRig {
	r := &watchRig{start: time.Now()}
	r.lw = newLivenessWatch(self, slog.New(logRecorder{r}), func(_ silentPeer, d Delivery) {
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
	r.lw.losses = r.losses.Load
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

// logRecorder keeps the messages logged through it.
type logRecorder struct{ r *watchRig }

func (l logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (l logRecorder) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l logRecorder) WithGroup(string) slog.Handler            { return l }
func (l logRecorder) Handle(_ context.Context, rec slog.Record) error {
	l.r.mu.Lock()
	defer l.r.mu.Unlock()
	l.r.logs = append(l.r.logs, rec.Message)
	return nil
}

func (r *watchRig) handovers() ([]string, []time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.handed), slices.Clone(r.handedAt)
}

// sortedHandovers are the streams handed over, in order of name.
func (r *watchRig) sortedHandovers() []string {
	handed, _ := r.handovers()
	slices.Sort(handed)
	return handed
}

// logged counts the log messages that contain part.
func (r *watchRig) logged(part string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, m := range r.logs {
		if strings.Contains(m, part) {
			n++
		}
	}
	return n
}

// fakeWorker writes the heartbeats of a worker instance holding streams
// (each stream one delivery, named by it).
type fakeWorker struct {
	beats *Beats
	held  map[string]Delivery
	seq   uint64
}

func newFakeWorker(instance string, timeout time.Duration, streams ...string) *fakeWorker {
	w := &fakeWorker{beats: NewBeats("w-"+instance, instance, timeout), held: map[string]Delivery{}}
	w.take(streams...)
	return w
}

func (w *fakeWorker) take(streams ...string) {
	for _, s := range streams {
		w.seq++
		w.held[s] = Delivery{StreamID: s, Reply: "reply." + s, Seq: w.seq, Delivered: 1}
	}
}

func (w *fakeWorker) drop(streams ...string) {
	for _, s := range streams {
		delete(w.held, s)
	}
}

// next is the next heartbeat: full when asked, or the first.
func (w *fakeWorker) next(full bool) Heartbeat {
	return w.beats.Next(slices.Collect(maps.Values(w.held)), full)
}

// beatEvery sends a delta to lw every interval, n times.
func (w *fakeWorker) beatEvery(lw *livenessWatch, interval time.Duration, n int) {
	for range n {
		lw.observe(w.next(false))
		time.Sleep(interval)
	}
}

func TestSilentWorkerIsHandedOverAfterItsTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newWatchRig(t, "")
		const timeout = time.Second
		// Worker a beats every 250ms until 1s, then falls silent; worker b
		// keeps beating.
		a := newFakeWorker("a", timeout, "s1", "s2")
		b := newFakeWorker("b", timeout, "s3")
		for range 4 {
			r.lw.observe(a.next(false))
			r.lw.observe(b.next(false))
			time.Sleep(250 * time.Millisecond)
		}
		lastA := time.Since(r.start) - 250*time.Millisecond
		b.beatEvery(r.lw, 250*time.Millisecond, 8)
		if got := r.sortedHandovers(); !slices.Equal(got, []string{"s1", "s2"}) {
			t.Fatalf("handed over %v, want s1 and s2 once each", got)
		}
		_, at := r.handovers()
		for _, d := range at {
			if late := d - lastA; late <= timeout || late > timeout+watchTick {
				t.Errorf("handed over %v after the last heartbeat, want within (%v, %v]", late, timeout, timeout+watchTick)
			}
		}
	})
}

func TestDeltasKeepTheSetAndRemovedDeliveriesAreNeverHandedOver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newWatchRig(t, "")
		a := newFakeWorker("a", time.Second, "s1", "s2", "s3")
		r.lw.observe(a.next(true))
		a.drop("s1")
		a.take("s4")
		r.lw.observe(a.next(false))
		a.drop("s2", "s4")
		a.take("s5")
		hb := a.next(false)
		if len(hb.Deliveries) != 0 || len(hb.Added) != 1 || len(hb.Removed) != 2 || hb.Held != 2 {
			t.Fatalf("delta %+v, want s5 added, two removed, two held", hb)
		}
		r.lw.observe(hb)
		time.Sleep(2 * time.Second)
		if got := r.sortedHandovers(); !slices.Equal(got, []string{"s3", "s5"}) {
			t.Fatalf("handed over %v, want what a held last: s3, s5", got)
		}
	})
}

func TestMissedBeatForgetsTheSetUntilAFullBeat(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newWatchRig(t, "")
		const timeout = time.Second
		a := newFakeWorker("a", timeout, "s1")
		r.lw.observe(a.next(true))
		// Beat 2 is lost on the way; in it a let go of s1 (another worker
		// owns it now) and took s2.
		a.drop("s1")
		a.take("s2")
		a.next(false)
		a.beatEvery(r.lw, 250*time.Millisecond, 3)
		if n := r.logged("until its next full heartbeat"); n != 1 {
			t.Fatalf("the missed beat logged %d times, want once", n)
		}
		// a falls silent before its next full beat: nothing is handed
		// over, not even s2, and the silence is logged.
		time.Sleep(2 * timeout)
		if handed, _ := r.handovers(); len(handed) != 0 {
			t.Fatalf("handed over %v from a set that missed a beat", handed)
		}
		if n := r.logged("a silent worker's deliveries are unknown"); n != 1 {
			t.Fatalf("the silent worker's unknown deliveries logged %d times, want once", n)
		}
	})
}

func TestFullBeatRestoresAForgottenSet(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newWatchRig(t, "")
		a := newFakeWorker("a", time.Second, "s1")
		r.lw.observe(a.next(true))
		a.drop("s1")
		a.take("s2")
		a.next(false) // lost
		r.lw.observe(a.next(false))
		a.take("s3")
		r.lw.observe(a.next(true))
		a.take("s4")
		r.lw.observe(a.next(false))
		time.Sleep(2 * time.Second)
		if got := r.sortedHandovers(); !slices.Equal(got, []string{"s2", "s3", "s4"}) {
			t.Fatalf("handed over %v, want s2, s3, s4", got)
		}
	})
}

// TestWatcherHandsNothingOver runs scenarios after which a worker falls
// silent and the watcher must not hand over anything it held.
func TestWatcherHandsNothingOver(t *testing.T) {
	for _, tc := range []struct {
		name string
		self string // the watcher's own instance
		run  func(r *watchRig)
	}{{
		name: "started between full beats",
		run: func(r *watchRig) {
			a := newFakeWorker("a", time.Second, "s1")
			a.next(true) // before the watcher listened
			a.take("s2")
			a.beatEvery(r.lw, 250*time.Millisecond, 4)
		},
	}, {
		// The watcher reconnects: whatever a sent meanwhile is lost, and a
		// never beats again, so no gap will show.
		name: "losses on the connection",
		run: func(r *watchRig) {
			r.lw.observe(newFakeWorker("a", time.Second, "s1").next(true))
			time.Sleep(watchTick)
			r.losses.Add(1)
		},
	}, {
		// The sender holds something the watcher never heard of.
		name: "held count mismatch",
		run: func(r *watchRig) {
			a := newFakeWorker("a", time.Second, "s1")
			r.lw.observe(a.next(true))
			hb := a.next(false)
			hb.Held = 2
			r.lw.observe(hb)
		},
	}, {
		name: "leaving worker",
		run: func(r *watchRig) {
			a := newFakeWorker("a", time.Second, "s1")
			r.lw.observe(a.next(true))
			r.lw.observe(a.beats.Leaving())
		},
	}, {
		name: "its own worker",
		self: "me",
		run: func(r *watchRig) {
			r.lw.observe(newFakeWorker("me", time.Second, "s1").next(true))
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newWatchRig(t, tc.self)
				tc.run(r)
				time.Sleep(5 * time.Second)
				if handed, _ := r.handovers(); len(handed) != 0 {
					t.Fatalf("handed over %v", handed)
				}
			})
		})
	}
}

func TestDeafWatcherJudgesNoOne(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newWatchRig(t, "")
		r.lw.observe(newFakeWorker("a", time.Second, "s1").next(true))
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

// TestDeltasTrackChurn applies many beats of random churn, with full beats
// now and then, and checks that the watcher's set is the worker's after
// every beat, and that a delta carries only what changed.
func TestDeltasTrackChurn(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	w := newFakeWorker("a", time.Second)
	p := &peer{}
	for i := range 500 {
		before := maps.Clone(w.held)
		for range rng.IntN(5) {
			w.take(fmt.Sprintf("s%d", w.seq+1))
		}
		for s := range w.held {
			if rng.IntN(4) == 0 {
				w.drop(s)
			}
		}
		hb := w.next(i%10 == 0)
		if lost := p.apply(hb); lost != "" {
			t.Fatalf("beat %d: set lost (%s)", hb.Beat, lost)
		}
		want := map[DeliveryRef]Delivery{}
		for _, d := range w.held {
			want[d.Ref()] = d
		}
		if !maps.Equal(p.held, want) {
			t.Fatalf("beat %d: watcher holds %v, worker %v", hb.Beat, p.held, want)
		}
		if hb.Full {
			continue
		}
		added, removed := 0, 0
		for s := range w.held {
			if _, ok := before[s]; !ok {
				added++
			}
		}
		for s := range before {
			if _, ok := w.held[s]; !ok {
				removed++
			}
		}
		if len(hb.Added) != added || len(hb.Removed) != removed {
			t.Fatalf("beat %d: delta +%d -%d, want +%d -%d", hb.Beat, len(hb.Added), len(hb.Removed), added, removed)
		}
	}
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
