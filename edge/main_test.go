package edge

import (
	"bytes"
	"runtime"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(runnersAwaited{m})
}

// runnersAwaited runs the tests, then waits for the runners (runners.go)
// the last of them left: each outlives the stream it served by runnerIdle,
// by design, and the leak check would otherwise report one after whichever
// test that served a stream ran last.
type runnersAwaited struct{ m *testing.M }

func (r runnersAwaited) Run() int {
	code := r.m.Run()
	for deadline := time.Now().Add(3 * runnerIdle); runnersLeft() && time.Now().Before(deadline); {
		time.Sleep(runnerIdle / 20)
	}
	return code
}

// runnersLeft reports whether a runner goroutine is left.
func runnersLeft() bool {
	buf := make([]byte, 1<<20)
	return bytes.Contains(buf[:runtime.Stack(buf, true)], []byte("edge.(*runners).serve("))
}
