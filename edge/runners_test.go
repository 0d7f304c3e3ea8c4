package edge

import (
	"bytes"
	"runtime"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// goroutineID is the number of the goroutine that calls it, from the first
// line of its stack trace ("goroutine 7 [running]:").
func goroutineID() string {
	b := make([]byte, 64)
	b = b[:runtime.Stack(b, false)]
	return string(bytes.Fields(b)[1])
}

// goroutineAlive reports whether the goroutine numbered id exists.
func goroutineAlive(id string) bool {
	b := make([]byte, 1<<16)
	for {
		n := runtime.Stack(b, true)
		if n < len(b) {
			return bytes.Contains(append([]byte{'\n'}, b[:n]...), []byte("\ngoroutine "+id+" ["))
		}
		b = make([]byte, 2*len(b))
	}
}

// TestRunnerServesTheNextJob: a job handed over after another finished
// runs on the same goroutine, which exits once it waited runnerIdle for
// another job, and not before.
func TestRunnerServesTheNextJob(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newRunners(runnerIdle)
		var first, second string
		p.run(func() { first = goroutineID() })
		synctest.Wait()
		p.run(func() { second = goroutineID() })
		synctest.Wait()
		if first == "" || second != first {
			t.Fatalf("the second job ran on goroutine %q, the first on %q", second, first)
		}
		time.Sleep(runnerIdle - time.Nanosecond)
		synctest.Wait()
		if !goroutineAlive(first) {
			t.Fatalf("the runner exited before it waited %v", runnerIdle)
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if goroutineAlive(first) {
			t.Fatalf("the runner is still there after it waited %v", runnerIdle)
		}
	})
}

// TestRunnersDoNotWaitForABusyOne: a job handed over while the only runner
// is busy runs at once on another, and both runners exit once idle.
func TestRunnersDoNotWaitForABusyOne(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newRunners(runnerIdle)
		release := make(chan struct{})
		var busy, other string
		p.run(func() {
			busy = goroutineID()
			<-release
		})
		synctest.Wait()
		p.run(func() { other = goroutineID() })
		synctest.Wait()
		if other == "" || other == busy {
			t.Fatalf("the second job ran on goroutine %q while the busy one, %q, waited", other, busy)
		}
		close(release)
		time.Sleep(runnerIdle)
		synctest.Wait()
		for _, id := range []string{busy, other} {
			if goroutineAlive(id) {
				t.Fatalf("runner %s is still there after it waited %v", id, runnerIdle)
			}
		}
	})
}

// useStack uses about depth × 300 bytes of stack, as rendering and
// writing a batch does.
//
//go:noinline
func useStack(depth int) byte {
	var frame [256]byte
	frame[depth%len(frame)] = byte(depth)
	if depth == 0 {
		return frame[0]
	}
	return useStack(depth-1) + frame[depth%len(frame)]
}

// BenchmarkRunners runs jobs that use about 5 KB of stack, 100 at a time
// as 100 streams' tokens would be, on a new goroutine each ("go") and on
// the edge's runners ("runners").
func BenchmarkRunners(b *testing.B) {
	const wave = 100
	for _, bc := range []struct {
		name string
		run  func(func())
	}{
		{"go", func(job func()) { go job() }},
		{"runners", newRunners(runnerIdle).run},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var wg sync.WaitGroup
			job := func() {
				useStack(16)
				wg.Done()
			}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				wg.Add(1)
				bc.run(job)
				if i%wave == wave-1 {
					wg.Wait()
				}
			}
			wg.Wait()
		})
	}
}
