package liveness

import (
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

// TestSeveralSilentWorkersAreHeldUntilHardEvidence: three workers fall
// silent at once and their probes time out. Nothing is handed over: the
// stall is more likely the server's. Then either the server reports them
// gone (no responders), and everything moves, or they beat again, and
// nothing does.
func TestSeveralSilentWorkersAreHeldUntilHardEvidence(t *testing.T) {
	for _, tc := range []struct {
		name string
		then func(r *watchRig, workers []*fakeWorker)
		want []string
	}{{
		name: "no responders",
		then: func(r *watchRig, _ []*fakeWorker) { r.hung.Store(false) },
		want: []string{"a1", "a2", "b1", "c1"},
	}, {
		name: "they beat again",
		then: func(r *watchRig, workers []*fakeWorker) {
			for range 20 {
				for _, w := range workers {
					r.lw.observe(w.next(false))
				}
				time.Sleep(250 * time.Millisecond)
			}
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newWatchRig(t, "")
				r.hung.Store(true)
				const timeout = time.Second
				workers := []*fakeWorker{
					newFakeWorker("a", timeout, "a1", "a2"), newFakeWorker("b", timeout, "b1"), newFakeWorker("c", timeout, "c1"),
				}
				for _, w := range workers {
					r.lw.observe(w.next(true))
				}
				time.Sleep(10 * time.Second)
				if handed, _ := r.handovers(); len(handed) != 0 {
					t.Fatalf("handed over %v while several workers were silent and no probe had hard evidence", handed)
				}
				if n := r.logged("reason=other workers silent"); n < 3*4 {
					t.Fatalf("logged %d held judgements, want each worker's held at every probe (3 workers, 4 probes or more each)", n)
				}
				evidence := time.Since(r.start)
				tc.then(r, workers)
				time.Sleep(2*timeout + watchTick)
				if got := r.sortedHandovers(); !slices.Equal(got, tc.want) {
					t.Fatalf("handed over %v, want %v", got, tc.want)
				}
				if _, at := r.handovers(); len(at) > 0 && at[len(at)-1]-evidence > timeout+2*watchTick {
					t.Errorf("handed over %v after the server reported them gone, want within a probe", at[len(at)-1]-evidence)
				}
			})
		})
	}
}

// TestLateEchoHoldsAJudgement: a hung worker is not handed over while the
// watcher's own echo comes back late (by more than a quarter of the
// worker's timeout): its heartbeats may be queued behind. Once the echo is
// on time again, the worker is handed over after a probe or two.
func TestLateEchoHoldsAJudgement(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newWatchRig(t, "")
		r.hung.Store(true)
		const timeout = time.Second
		r.echoDelay.Store(int64(400 * time.Millisecond))
		time.Sleep(time.Second)
		r.lw.observe(newFakeWorker("a", timeout, "s1").next(true))
		time.Sleep(10 * time.Second)
		if handed, _ := r.handovers(); len(handed) != 0 {
			t.Fatalf("handed over %v while the watcher's echo came late", handed)
		}
		if r.logged("reason=the watcher's own echo came") == 0 {
			t.Fatal("no held judgement logged")
		}
		r.echoDelay.Store(0)
		onTime := time.Since(r.start)
		time.Sleep(3 * timeout)
		handed, at := r.handovers()
		if !slices.Equal(handed, []string{"s1"}) {
			t.Fatalf("handed over %v once the echo was on time, want s1", handed)
		}
		if d := at[0] - onTime; d > 2*(timeout+watchTick) {
			t.Errorf("handed over %v after the echo was on time, want within two probes", d)
		}
	})
}

// TestSlowProbeHoldsAJudgement: a probe answered slowly says the server is
// behind; a timed-out probe of another worker soon after is held, and
// hands that worker over only once two of its timeouts passed since.
func TestSlowProbeHoldsAJudgement(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newWatchRig(t, "")
		const timeout = time.Second
		const took = 400 * time.Millisecond
		r.probe("a", verdictMute, 0)
		r.probe("b", verdictAlive, took)
		a, b := newFakeWorker("a", timeout, "s1"), newFakeWorker("b", timeout, "s2")
		r.lw.observe(a.next(true))
		r.lw.observe(b.next(true))
		// The slow answer comes no sooner than this.
		slow := time.Since(r.start) + timeout + took
		// b falls silent first, is probed a timeout later, and answers
		// slowly (over a quarter of its timeout); then it beats again. a
		// falls silent 500ms after b.
		time.Sleep(500 * time.Millisecond)
		r.lw.observe(a.next(false))
		time.Sleep(timeout - 500*time.Millisecond + watchTick + took)
		go b.beatEvery(r.lw, 250*time.Millisecond, 16)
		time.Sleep(5 * time.Second)
		handed, at := r.handovers()
		if !slices.Equal(handed, []string{"s1"}) {
			t.Fatalf("handed over %v, want s1", handed)
		}
		if r.logged("reason=a probe took") == 0 {
			t.Fatal("the judgement was not held after a slow probe")
		}
		if at[0]-slow < holdMemory*timeout {
			t.Errorf("handed over %v after the slow probe, want no sooner than %v", at[0]-slow, holdMemory*timeout)
		}
	})
}

// TestTimedOutHandoverHoldsTheNext: once a worker was handed over on a
// timed-out probe, another whose probe times out soon after is held (the
// first handover may be what made it late), and handed over once two of
// its timeouts passed since.
func TestTimedOutHandoverHoldsTheNext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newWatchRig(t, "")
		r.hung.Store(true)
		const timeout = time.Second
		a, b := newFakeWorker("a", timeout, "s1"), newFakeWorker("b", timeout, "s2")
		r.lw.observe(a.next(true))
		r.lw.observe(b.next(true))
		// a falls silent at once, b 1.5s later: b is not yet silent past
		// its timeout when a is judged (after two timeouts), but its probe
		// times out less than two timeouts after that.
		time.Sleep(1500 * time.Millisecond)
		r.lw.observe(b.next(false))
		time.Sleep(6 * time.Second)
		handed, at := r.handovers()
		if !slices.Equal(handed, []string{"s1", "s2"}) {
			t.Fatalf("handed over %v, want s1 then s2", handed)
		}
		if r.logged("reason=another worker was handed over on a timed-out probe") == 0 {
			t.Fatal("b's judgement was not held after a's")
		}
		if d := at[1] - at[0]; d < holdMemory*timeout {
			t.Errorf("handed b over %v after a, want no sooner than %v", d, holdMemory*timeout)
		}
	})
}

// TestHeldPastAckWaitIsLeftToAckWait: workers held for longer than AckWait
// are not handed over even on hard evidence: the server has redelivered
// their requests, and a NAK of an old delivery would take a request from
// its new owner.
func TestHeldPastAckWaitIsLeftToAckWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newWatchRig(t, "")
		const timeout, ackWait = time.Second, 4 * time.Second
		r.lw.mu.Lock()
		r.lw.ackWait = ackWait
		r.lw.mu.Unlock()
		r.hung.Store(true)
		r.lw.observe(newFakeWorker("a", timeout, "a1").next(true))
		r.lw.observe(newFakeWorker("b", timeout, "b1").next(true))
		time.Sleep(ackWait + timeout)
		r.hung.Store(false)
		time.Sleep(2 * timeout)
		if handed, _ := r.handovers(); len(handed) != 0 {
			t.Fatalf("handed over %v after AckWait", handed)
		}
		if n := r.logged("longer than AckWait ago"); n != 2 {
			t.Fatalf("logged %d workers left to AckWait, want 2", n)
		}
	})
}
