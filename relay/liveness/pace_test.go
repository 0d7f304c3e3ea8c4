package liveness

import (
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

// streamNames names n streams of a worker.
func streamNames(worker string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-s%04d", worker, i)
	}
	return out
}

// paceBound is when the last of n handovers comes at the latest, from the
// judgement on: the burst at once, the rest at the rate.
func paceBound(n int) time.Duration {
	return time.Duration(max(n-handoverBurst, 0)) * time.Second / handoverRate
}

// checkPace fails t if, in some window between two handovers, more went
// out than the burst plus the rate over the window. For the window from
// handover i to handover j (i ≤ j) that is j-i+1 ≤ burst + rate·(at[j]-at[i]),
// that is (j+1 - rate·at[j]) + (rate·at[i] - i) ≤ burst: it checks every
// j against the largest second term so far.
func checkPace(t *testing.T, at []time.Duration) {
	t.Helper()
	best := -1e18
	for j, a := range at {
		best = max(best, handoverRate*a.Seconds()-float64(j))
		if n := float64(j+1) - handoverRate*a.Seconds() + best; n > handoverBurst+1e-3 {
			t.Fatalf("handover %d at %v: %.0f handovers in a window where the pace allows %d plus %d a second",
				j, a, n, handoverBurst, handoverRate)
		}
	}
}

// TestDeadWorkersRequestsAllMoveWithinThePace: one dead worker holding
// 2,600 requests has every one handed over, once, the burst at once and
// the rest at the pace: within about 2 s of its judgement.
func TestDeadWorkersRequestsAllMoveWithinThePace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newWatchRig(t, "")
		const timeout, n = time.Second, 2600
		names := streamNames("a", n)
		r.lw.observe(newFakeWorker("a", timeout, names...).next(true))
		last := time.Since(r.start)
		time.Sleep(timeout + paceBound(n) + time.Second)
		if got := r.sortedHandovers(); !slices.Equal(got, names) {
			t.Fatalf("handed over %d requests (%d distinct), want each of the %d once", len(got), len(slices.Compact(got)), n)
		}
		_, at := r.handovers()
		if bound := last + timeout + watchTick + paceBound(n); at[n-1] > bound {
			t.Errorf("the last handover came %v after the last heartbeat, want within %v", at[n-1]-last, bound-last)
		}
		// The pace held them back: the last is no sooner than it allows.
		if spread := at[n-1] - at[0]; spread < paceBound(n)-time.Millisecond {
			t.Errorf("handed over %d requests in %v, sooner than the pace allows (%v)", n, spread, paceBound(n))
		}
		checkPace(t, at)
		if r.logged("queued for handover") != 1 || r.logged("finished handing over a silent worker's requests") != 1 {
			t.Error("the handover of the set and its end were not logged once each")
		}
	})
}

// TestHandoverPaceHoldsAcrossWorkers: four workers die at once (no
// responders: hard evidence) holding 2,600 requests each; all 10,400 are
// handed over, and never faster than the pace.
func TestHandoverPaceHoldsAcrossWorkers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newWatchRig(t, "")
		const timeout, n = time.Second, 2600
		var all []string
		for _, w := range []string{"a", "b", "c", "d"} {
			names := streamNames(w, n)
			all = append(all, names...)
			r.lw.observe(newFakeWorker(w, timeout, names...).next(true))
		}
		time.Sleep(timeout + paceBound(len(all)) + time.Second)
		if got := r.sortedHandovers(); !slices.Equal(got, all) {
			t.Fatalf("handed over %d requests, want each of the %d once", len(got), len(all))
		}
		_, at := r.handovers()
		checkPace(t, at)
		if r.logged("finished handing over a silent worker's requests") != 4 {
			t.Error("the end of each worker's handover was not logged")
		}
		r.lw.mu.Lock()
		deferred := r.lw.deferred
		r.lw.mu.Unlock()
		if want := len(all) - handoverBurst; deferred != want {
			t.Errorf("counted %d handovers deferred, want %d (all but the burst)", deferred, want)
		}
	})
}

// TestWorkerHeardAgainKeepsWhatWasNotHandedOverYet: a worker judged on a
// timed-out probe that beats again while its requests are being handed
// over keeps the rest: it lives.
func TestWorkerHeardAgainKeepsWhatWasNotHandedOverYet(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newWatchRig(t, "")
		r.hung.Store(true)
		const timeout, n = time.Second, 2600
		a := newFakeWorker("a", timeout, streamNames("a", n)...)
		r.lw.observe(a.next(true))
		// Judged after two timeouts; a second later about 1,500 are
		// handed over, and it beats again.
		time.Sleep(2*timeout + watchTick + time.Second)
		a.beatEvery(r.lw, 250*time.Millisecond, 20)
		handed, _ := r.handovers()
		if len(handed) <= handoverBurst || len(handed) >= n {
			t.Fatalf("handed over %d of %d, want some beyond the burst but not all", len(handed), n)
		}
		if r.logged("heard again") != 1 {
			t.Error("keeping the rest was not logged")
		}
	})
}

// TestPaceStopsAtAckWait: what the pace has not handed over by AckWait
// after the worker was last seen is left to AckWait, which has moved it.
func TestPaceStopsAtAckWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newWatchRig(t, "")
		const timeout, ackWait, n = time.Second, 4 * time.Second, 5000
		r.lw.mu.Lock()
		r.lw.ackWait = ackWait
		r.lw.mu.Unlock()
		r.lw.observe(newFakeWorker("a", timeout, streamNames("a", n)...).next(true))
		seen := time.Since(r.start)
		time.Sleep(timeout + paceBound(n) + time.Second)
		handed, at := r.handovers()
		if len(handed) <= handoverBurst || len(handed) >= n {
			t.Fatalf("handed over %d of %d, want those the pace allowed within AckWait", len(handed), n)
		}
		if last := at[len(at)-1] - seen; last >= ackWait {
			t.Errorf("handed over a request %v after the worker was last seen, want within AckWait (%v)", last, ackWait)
		}
		if r.logged("AckWait has redelivered the requests not handed over yet") != 1 {
			t.Error("leaving the rest to AckWait was not logged")
		}
	})
}
