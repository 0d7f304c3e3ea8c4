package liveness

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

	"github.com/relaydev/relay/relay/wire"
)

// watchRig runs a livenessWatch in a synctest bubble and records its
// handovers with the bubble's time, and its log messages.
type watchRig struct {
	lw        *livenessWatch
	start     time.Time
	deaf      atomic.Bool   // echoes do not come back
	echoDelay atomic.Int64  // how long echoes take to come back
	answers   atomic.Bool   // probed workers answer (else: no responders)
	hung      atomic.Bool   // probes get no answer until they time out
	losses    atomic.Uint64 // what lw.losses reports
	mu        sync.Mutex
	probes    map[string]probeMode // by instance, instead of the above
	handed    []string             // stream ids, in order
	handedAt  []time.Duration      // since start
	logs      []string
	synced    []string // the instances asked for a full beat, "" for all
}

// probeMode is what probes of one instance get: v after a while, or, for
// verdictMute, nothing until they time out.
type probeMode struct {
	v     verdict
	after time.Duration
}

func newWatchRig(t *testing.T, self string) *watchRig {
	r := &watchRig{start: time.Now()}
	r.lw = newLivenessWatch(self, slog.New(logRecorder{r}), func(_ silentPeer, d wire.Delivery) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.handed = append(r.handed, d.StreamID)
		r.handedAt = append(r.handedAt, time.Since(r.start))
	})
	r.lw.ping = func(sent time.Time) {
		switch d := time.Duration(r.echoDelay.Load()); {
		case r.deaf.Load():
		case d > 0:
			time.AfterFunc(d, func() { r.lw.echoed(sent) })
		default:
			r.lw.echoed(sent)
		}
	}
	r.lw.losses = r.losses.Load
	r.lw.probe = func(ctx context.Context, instance string) verdict {
		r.mu.Lock()
		m, ok := r.probes[instance]
		r.mu.Unlock()
		switch {
		case ok && m.v != verdictMute && sleep(ctx, m.after):
			return m.v
		case ok:
			<-ctx.Done()
			return verdictMute
		case r.answers.Load():
			return verdictAlive
		case r.hung.Load():
			<-ctx.Done()
			return verdictMute
		}
		return verdictGone
	}
	r.lw.sync = func(instance string) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.synced = append(r.synced, instance)
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

// probe sets what probes of instance get from now on.
func (r *watchRig) probe(instance string, v verdict, after time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.probes == nil {
		r.probes = map[string]probeMode{}
	}
	r.probes[instance] = probeMode{v: v, after: after}
}

// logRecorder keeps the messages logged through it, each followed by its
// reason attribute if it has one.
type logRecorder struct{ r *watchRig }

func (l logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (l logRecorder) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l logRecorder) WithGroup(string) slog.Handler            { return l }
func (l logRecorder) Handle(_ context.Context, rec slog.Record) error {
	msg := rec.Message
	rec.Attrs(func(a slog.Attr) bool {
		if a.Key == "reason" {
			msg += " reason=" + a.Value.String()
		}
		return true
	})
	l.r.mu.Lock()
	defer l.r.mu.Unlock()
	l.r.logs = append(l.r.logs, msg)
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

// syncs are the requests for full beats so far.
func (r *watchRig) syncs() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.synced)
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
	held  map[string]wire.Delivery
	seq   uint64
}

func newFakeWorker(instance string, timeout time.Duration, streams ...string) *fakeWorker {
	w := &fakeWorker{beats: NewBeats("w-"+instance, instance, timeout), held: map[string]wire.Delivery{}}
	w.take(streams...)
	return w
}

func (w *fakeWorker) take(streams ...string) {
	for _, s := range streams {
		w.seq++
		w.held[s] = wire.Delivery{StreamID: s, Reply: "reply." + s, Seq: w.seq, Delivered: 1}
	}
}

func (w *fakeWorker) drop(streams ...string) {
	for _, s := range streams {
		delete(w.held, s)
	}
}

// next is the next heartbeat: full when asked, or the first.
func (w *fakeWorker) next(full bool) wire.Heartbeat {
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

// TestLateWorkerThatAnswersKeepsItsRequests: a worker whose heartbeats
// stop but who answers the watcher's probe keeps its requests for as long
// as it answers; once it stops answering, they are handed over.
func TestLateWorkerThatAnswersKeepsItsRequests(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newWatchRig(t, "")
		r.answers.Store(true)
		r.lw.observe(newFakeWorker("a", time.Second, "s1").next(true))
		time.Sleep(10 * time.Second)
		if handed, _ := r.handovers(); len(handed) != 0 {
			t.Fatalf("handed over %v from a worker that answered its probes", handed)
		}
		if n := r.logged("answered a probe"); n == 0 {
			t.Fatal("nothing logged about the late heartbeats")
		}
		r.answers.Store(false)
		stopped := time.Since(r.start)
		time.Sleep(3 * time.Second)
		handed, at := r.handovers()
		if !slices.Equal(handed, []string{"s1"}) {
			t.Fatalf("handed over %v once the worker stopped answering, want s1", handed)
		}
		if d := at[0] - stopped; d > time.Second+2*watchTick {
			t.Errorf("handed over %v after the worker stopped answering, want within its timeout", d)
		}
	})
}

// TestHungWorkerIsHandedOverAfterItsProbeTimesOut: a worker that is alive
// to the server but answers nothing (paused) loses its requests one
// timeout after its silence was noticed.
func TestHungWorkerIsHandedOverAfterItsProbeTimesOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newWatchRig(t, "")
		r.hung.Store(true)
		const timeout = time.Second
		r.lw.observe(newFakeWorker("a", timeout, "s1").next(true))
		last := time.Since(r.start)
		time.Sleep(5 * time.Second)
		handed, at := r.handovers()
		if !slices.Equal(handed, []string{"s1"}) {
			t.Fatalf("handed over %v, want s1", handed)
		}
		if late := at[0] - last; late <= 2*timeout || late > 2*timeout+2*watchTick {
			t.Errorf("handed over %v after the last heartbeat, want within (%v, %v]", late, 2*timeout, 2*timeout+2*watchTick)
		}
	})
}

// TestBeatDuringProbeEndsTheSuspicion: a heartbeat heard while the probe
// is out proves the worker alive, whatever the probe then says.
func TestBeatDuringProbeEndsTheSuspicion(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newWatchRig(t, "")
		r.hung.Store(true)
		a := newFakeWorker("a", time.Second, "s1")
		r.lw.observe(a.next(true))
		// Silent for 1.5s: suspected, probed, and the probe hangs; then a
		// beat comes, and again every 250ms.
		time.Sleep(1500 * time.Millisecond)
		a.beatEvery(r.lw, 250*time.Millisecond, 12)
		if handed, _ := r.handovers(); len(handed) != 0 {
			t.Fatalf("handed over %v from a worker heard during its probe", handed)
		}
	})
}

// beatStep is one heartbeat of a fakeWorker in a scenario: what changed
// before it, whether it is full, and whether the watcher hears it.
type beatStep struct {
	take, drop []string
	full, lost bool
}

// TestWatcherHandsOverWhatItKnows plays heartbeats to a watcher, then
// silence, and checks what it hands over, and what it logs.
func TestWatcherHandsOverWhatItKnows(t *testing.T) {
	for _, tc := range []struct {
		name  string
		steps []beatStep
		want  []string
		// logs counts the log lines that contain each key.
		logs map[string]int
	}{{
		name: "deltas keep the set; what was removed is not handed over",
		steps: []beatStep{
			{take: []string{"s1", "s2", "s3"}, full: true},
			{drop: []string{"s1"}, take: []string{"s4"}},
			{drop: []string{"s2", "s4"}, take: []string{"s5"}},
		},
		want: []string{"s3", "s5"},
	}, {
		// In the lost beat the worker let go of s1 (another worker owns it
		// now) and took s2.
		name: "a missed beat forgets the set until a full beat",
		steps: []beatStep{
			{take: []string{"s1"}, full: true},
			{drop: []string{"s1"}, take: []string{"s2"}, lost: true},
			{}, {}, {},
		},
		logs: map[string]int{"until its next full heartbeat": 1, "some of a silent worker's deliveries are unknown": 1},
	}, {
		// A watcher started after a's first beats knows only what a took
		// since it listens.
		name: "it knows what it saw taken",
		steps: []beatStep{
			{take: []string{"s1"}, full: true, lost: true},
			{take: []string{"s2"}, lost: true},
			{take: []string{"s3"}},
			{take: []string{"s4"}},
			{drop: []string{"s3"}},
		},
		want: []string{"s4"},
		logs: map[string]int{"some of a silent worker's deliveries are unknown": 1},
	}, {
		name: "a full beat restores a forgotten set",
		steps: []beatStep{
			{take: []string{"s1"}, full: true},
			{drop: []string{"s1"}, take: []string{"s2"}, lost: true},
			{},
			{take: []string{"s3"}, full: true},
			{take: []string{"s4"}},
		},
		want: []string{"s2", "s3", "s4"},
		logs: map[string]int{"until its next full heartbeat": 1, "some of a silent worker's deliveries are unknown": 0},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newWatchRig(t, "")
				a := newFakeWorker("a", time.Second)
				for _, st := range tc.steps {
					a.drop(st.drop...)
					a.take(st.take...)
					if hb := a.next(st.full); !st.lost {
						r.lw.observe(hb)
					}
					time.Sleep(250 * time.Millisecond)
				}
				time.Sleep(2 * time.Second)
				if got := r.sortedHandovers(); !slices.Equal(got, tc.want) {
					t.Fatalf("handed over %v, want %v", got, tc.want)
				}
				for part, n := range tc.logs {
					if got := r.logged(part); got != n {
						t.Errorf("logged %q %d times, want %d", part, got, n)
					}
				}
			})
		})
	}
}

func TestWatcherAsksForFullBeatsWhenItLacksASet(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newWatchRig(t, "")
		synctest.Wait()
		// Just started: it heard nothing, so it asks everyone.
		if got := r.syncs(); !slices.Equal(got, []string{""}) {
			t.Fatalf("asked %q at start, want everyone", got)
		}
		// Heard a delta of a worker it has no set of: it asks that worker,
		// once a second however many deltas follow.
		a := newFakeWorker("a", time.Second, "s1")
		a.next(true) // before the watcher listened
		a.beatEvery(r.lw, 250*time.Millisecond, 6)
		if got := r.syncs(); !slices.Equal(got, []string{"", "a", "a"}) {
			t.Fatalf("asked %q, want a once a second", got)
		}
		// Its full beat ends the requests, until a beat is missed.
		r.lw.observe(a.next(true))
		a.beatEvery(r.lw, 250*time.Millisecond, 4)
		a.next(false) // lost
		r.lw.observe(a.next(false))
		if got := r.syncs(); !slices.Equal(got, []string{"", "a", "a", "a"}) {
			t.Fatalf("asked %q, want a again after the missed beat", got)
		}
		// The connection lost messages: everyone again.
		r.losses.Add(1)
		time.Sleep(2 * watchTick)
		if got := r.syncs(); !slices.Equal(got, []string{"", "a", "a", "a", ""}) {
			t.Fatalf("asked %q, want everyone after losses", got)
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
			a.next(false) // idem
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
		want := map[wire.DeliveryRef]wire.Delivery{}
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
