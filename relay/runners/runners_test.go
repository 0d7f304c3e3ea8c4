package runners

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
// runs on the same goroutine, which exits once it waited Idle for
// another job, and not before.
func TestRunnerServesTheNextJob(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := New(Idle)
		var first, second string
		p.Run(func() { first = goroutineID() })
		synctest.Wait()
		p.Run(func() { second = goroutineID() })
		synctest.Wait()
		if first == "" || second != first {
			t.Fatalf("the second job ran on goroutine %q, the first on %q", second, first)
		}
		time.Sleep(Idle - time.Nanosecond)
		synctest.Wait()
		if !goroutineAlive(first) {
			t.Fatalf("the runner exited before it waited %v", Idle)
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if goroutineAlive(first) {
			t.Fatalf("the runner is still there after it waited %v", Idle)
		}
	})
}

// TestRunnersDoNotWaitForABusyOne: a job handed over while the only runner
// is busy runs at once on another, and both runners exit once idle.
func TestRunnersDoNotWaitForABusyOne(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := New(Idle)
		release := make(chan struct{})
		var busy, other string
		p.Run(func() {
			busy = goroutineID()
			<-release
		})
		synctest.Wait()
		p.Run(func() { other = goroutineID() })
		synctest.Wait()
		if other == "" || other == busy {
			t.Fatalf("the second job ran on goroutine %q while the busy one, %q, waited", other, busy)
		}
		close(release)
		time.Sleep(Idle)
		synctest.Wait()
		for _, id := range []string{busy, other} {
			if goroutineAlive(id) {
				t.Fatalf("runner %s is still there after it waited %v", id, Idle)
			}
		}
	})
}

// TestSurplusRunnersExitUnderSteadyLoad: of two waiting runners, jobs go
// to the one that waited least, so that under a load one runner serves,
// the other exits after Idle; the one exits too once the load ends.
func TestSurplusRunnersExitUnderSteadyLoad(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := New(Idle)
		ids := make([]string, 2)
		releases := []chan struct{}{make(chan struct{}), make(chan struct{})}
		for i := range ids {
			p.Run(func() {
				ids[i] = goroutineID()
				<-releases[i]
			})
		}
		synctest.Wait()
		for _, release := range releases { // the second waits least
			close(release)
			synctest.Wait()
		}
		for range 4 {
			var ran string
			p.Run(func() { ran = goroutineID() })
			synctest.Wait()
			if ran != ids[1] {
				t.Fatalf("a job ran on goroutine %q, not on %q, which waited least (%q waited longer)", ran, ids[1], ids[0])
			}
			time.Sleep(Idle / 2)
			synctest.Wait()
		}
		if goroutineAlive(ids[0]) {
			t.Fatalf("the surplus runner is still there after %v without a job", 2*Idle)
		}
		if !goroutineAlive(ids[1]) {
			t.Fatal("the runner that served exited")
		}
		time.Sleep(Idle)
		synctest.Wait()
		if goroutineAlive(ids[1]) {
			t.Fatalf("the runner that served is still there after %v without a job", Idle)
		}
	})
}

// TestJobHandedAsTheWaitEnds: a job handed over at the moment the waiting
// runner's time is up runs, whether that runner takes it or exits first.
func TestJobHandedAsTheWaitEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := New(Idle)
		p.Run(func() {})
		for i := range 100 {
			synctest.Wait()
			time.Sleep(Idle) // the runner's timer fires now too
			ran := false
			p.Run(func() { ran = true })
			synctest.Wait()
			if !ran {
				t.Fatalf("round %d: the job handed over as the runner's wait ended did not run", i)
			}
		}
		time.Sleep(Idle)
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
// a Pool's runners ("runners").
func BenchmarkRunners(b *testing.B) {
	const wave = 100
	for _, bc := range []struct {
		name string
		run  func(func())
	}{
		{"go", func(job func()) { go job() }},
		{"runners", New(Idle).Run},
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
