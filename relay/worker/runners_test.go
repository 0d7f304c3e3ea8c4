package worker

import (
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// A runner that finished its job takes the next one rather than a new
// goroutine starting, and exits once it waited its idle time for nothing.
func TestRunnersReuseAWaitingRunnerAndExitWhenIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newRunners(time.Second)
		var ran atomic.Int32
		p.run(func() { ran.Add(1) })
		synctest.Wait()
		idle := waiting(p)
		if len(idle) != 1 {
			t.Fatalf("%d runners wait after one job, want 1", len(idle))
		}
		r := idle[0]
		time.Sleep(time.Second / 2)
		p.run(func() { ran.Add(1) })
		synctest.Wait()
		if idle := waiting(p); len(idle) != 1 || idle[0] != r {
			t.Fatalf("the second job did not go to the waiting runner (idle %v, first runner %p)", idle, r)
		}
		time.Sleep(time.Second + time.Millisecond)
		synctest.Wait()
		if n := len(waiting(p)); n != 0 {
			t.Fatalf("%d runners still wait after their idle time", n)
		}
		if n := ran.Load(); n != 2 {
			t.Fatalf("%d jobs ran, want 2", n)
		}
	})
}

// A job handed over while every runner is busy starts a runner of its own
// at once, and the runner that waited least takes the next job, so that
// the others can run out their idle time.
func TestRunnersNeverWaitForABusyRunner(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newRunners(time.Second)
		release := make(chan struct{})
		started := make(chan struct{}, 2)
		for range 2 {
			p.run(func() { started <- struct{}{}; <-release })
		}
		<-started
		<-started // both run at once: the second did not wait for the first
		close(release)
		synctest.Wait()
		idle := waiting(p)
		if len(idle) != 2 {
			t.Fatalf("%d runners wait, want 2", len(idle))
		}
		p.run(func() {})
		synctest.Wait()
		if after := waiting(p); len(after) != 2 || after[1] != idle[1] {
			t.Fatal("the job did not go to the runner that waited least")
		}
		time.Sleep(2 * time.Second) // the runners exit
	})
}

// waiting returns the runners waiting for a job, the one that waited
// least last.
func waiting(p *runners) []*runner {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]*runner(nil), p.idle...)
}
