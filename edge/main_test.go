package edge

import (
	"bytes"
	"runtime"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/relaydev/relay/relay/runners"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(runnersAwaited{m})
}

// runnersAwaited runs the tests, then waits for the runners (relay/runners)
// the last of them left: each outlives the stream it served by runners.Idle,
// by design, and the leak check would otherwise report one after whichever
// test that served a stream ran last.
type runnersAwaited struct{ m *testing.M }

func (r runnersAwaited) Run() int {
	code := r.m.Run()
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
