package relaytest

import (
	"bytes"
	"runtime"
	"testing"
	"time"

	"github.com/relaydev/relay/relay/runners"
)

// RunnersAwaited runs a package's tests (goleak.VerifyTestMain takes it
// for the *testing.M), then waits for the runners (relay/runners) the last
// of them left: each outlives the work it served by runners.Idle, by
// design, and the leak check would otherwise report one after whichever
// test that used a pool ran last.
type RunnersAwaited struct{ M *testing.M }

// Run runs the tests, then waits up to three times runners.Idle for the
// last runner to exit.
func (r RunnersAwaited) Run() int {
	code := r.M.Run()
	for deadline := time.Now().Add(3 * runners.Idle); runnersLeft() && time.Now().Before(deadline); {
		time.Sleep(runners.Idle / 20)
	}
	return code
}

// runnersLeft reports whether a runner goroutine is left.
func runnersLeft() bool {
	buf := make([]byte, 1<<20)
	return bytes.Contains(buf[:runtime.Stack(buf, true)], []byte("runners.(*Pool).serve("))
}
