package breaker

import (
	"fmt"
	"time"
)

// tallySlots is how many slots a Tally's window is cut into: a verdict
// leaves the window at most a tenth of Window late.
const tallySlots = 10

// Tally is one node's record of the recent verdicts on one breaker: the
// signal that trips it. It counts the failures in a row, which a success
// ends and a neutral verdict leaves alone, and the successes and failures
// of a sliding window of Config.Window. The breaker trips on an outage,
// not on weather: Config.Failures failures with no success between them,
// or a failure that brings the window's share of failures to
// Config.FailureRatio once it holds Config.MinCalls calls. A provider that
// cuts or stalls a few answers in a hundred does neither: its runs of
// failures are short, and its share of them small.
//
// Like the rest of the package it has no clock: every call is given the
// time. The zero Tally is ready to use; it is not safe for concurrent use.
type Tally struct {
	streak int
	slot   time.Duration
	epoch  int64 // index of the newest slot
	ok     [tallySlots]int
	failed [tallySlots]int
}

// Observe records a verdict at now and reports whether the breaker should
// trip, and why. cfg is the breaker's, defaults filled or not; a disabled
// breaker never trips.
func (t *Tally) Observe(v Verdict, now time.Time, cfg Config) (trip bool, why string) {
	cfg = cfg.WithDefaults()
	i := t.advance(now, cfg.Window)
	switch v {
	case Success:
		t.streak = 0
		t.ok[i]++
		return false, ""
	case Failure:
		t.streak++
		t.failed[i]++
	default:
		return false, ""
	}
	if !cfg.Enabled() {
		return false, ""
	}
	if t.streak >= cfg.Failures {
		return true, fmt.Sprintf("%d failures in a row", t.streak)
	}
	ok, failed := t.sum()
	if n := ok + failed; cfg.FailureRatio > 0 && n >= cfg.MinCalls && float64(failed) >= cfg.FailureRatio*float64(n) {
		return true, fmt.Sprintf("%d of the last %d calls failed (within %v)", failed, n, cfg.Window)
	}
	return false, ""
}

// Counts are the successes and failures in the window at now, and the
// failures in a row.
func (t *Tally) Counts(now time.Time, cfg Config) (successes, failures, inARow int) {
	t.advance(now, cfg.WithDefaults().Window)
	successes, failures = t.sum()
	return successes, failures, t.streak
}

// Reset forgets everything, once the breaker it counts for has opened:
// the calls of before the outage say nothing about the provider after it.
func (t *Tally) Reset() { *t = Tally{} }

func (t *Tally) sum() (ok, failed int) {
	for i := range tallySlots {
		ok += t.ok[i]
		failed += t.failed[i]
	}
	return ok, failed
}

// advance moves the window to now, emptying the slots it left, and
// returns the index of now's slot. A changed window (a reload) starts
// over.
func (t *Tally) advance(now time.Time, window time.Duration) int {
	slot := max(window/tallySlots, time.Nanosecond)
	if slot != t.slot {
		streak := t.streak
		*t = Tally{slot: slot, streak: streak}
	}
	e := now.UnixNano() / int64(slot)
	switch {
	case e-t.epoch >= tallySlots:
		t.ok, t.failed = [tallySlots]int{}, [tallySlots]int{}
	default:
		for k := t.epoch + 1; k <= e; k++ {
			t.ok[k%tallySlots], t.failed[k%tallySlots] = 0, 0
		}
	}
	if e > t.epoch {
		t.epoch = e
	}
	return int(t.epoch % tallySlots)
}
