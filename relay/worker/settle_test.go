package worker

import (
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

func TestSettlementsWithinALingerStartTogether(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var ran atomic.Int32
		s := newSettler(settleLinger, func(f func()) { go f() })
		for range 3 {
			s.later(func() { ran.Add(1) })
			time.Sleep(settleLinger / 4)
		}
		synctest.Wait()
		if n := ran.Load(); n != 0 {
			t.Fatalf("%d settlements ran before the first one's linger passed", n)
		}
		// A linger after the first settlement came, every one has run.
		time.Sleep(settleLinger / 4)
		synctest.Wait()
		if n := ran.Load(); n != 3 {
			t.Fatalf("%d of 3 settlements ran when the first one's linger passed", n)
		}
		s.close()
	})
}

func TestCloseSettlesWhatIsQueued(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var ran atomic.Int32
		s := newSettler(time.Hour, func(f func()) { go f() })
		s.later(func() { ran.Add(1) })
		s.later(func() { ran.Add(1) })
		begin := time.Now()
		s.close()
		if n := ran.Load(); n != 2 {
			t.Fatalf("close returned with %d of 2 settlements done", n)
		}
		if d := time.Since(begin); d != 0 {
			t.Fatalf("close waited %v for the linger", d)
		}
	})
}

func TestWithoutLingerASettlementRunsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var ran atomic.Int32
		s := newSettler(0, func(f func()) { go f() })
		s.later(func() { ran.Add(1) })
		synctest.Wait()
		if n := ran.Load(); n != 1 {
			t.Fatalf("%d settlements ran; want the one, at once", n)
		}
		s.close()
	})
}
