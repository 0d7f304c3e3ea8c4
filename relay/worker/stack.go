package worker

// # A job waits on an 8 KiB stack
//
// A job spends nearly all its life on its slot's goroutine waiting for the
// provider's next token, and that goroutine's stack is held all along. The
// runtime doubles a stack that runs out and the collector halves one that
// uses under a quarter of it (counting 800 bytes of guard), so the stack
// stays at 8 KiB only while:
//
//   - the chain the job waits in (slot, handle, run, serve, call,
//     attempt, read, the leg's next, upstream's NextInto, down to the
//     HTTP/2 body's read) takes under 3.2 KiB: it takes 3,200 bytes, 32
//     short of what the test below allows; and
//   - nothing the job does on its own goroutine goes past 7.2 KiB.
//
// So the functions of that chain keep little in their frames: deltas and
// candidates go by pointer, an attempt's outcome is written to the
// caller's, what comes before and after a call is a function of its own;
// and what goes deep runs on a runner (aside). Over HTTP/1.1 the job
// reads the socket itself, and its stack is 16 KiB whatever the worker
// does.
//
// Jobs on 16 KiB stacks would hold 6 to 7 KiB more of stacks a waiting
// stream, 59 to 67 MiB at 10,000 streams (BenchmarkWaitingJobStacks;
// e2e/BENCHMARKS.md, "A job's stack").
//
// TestProcessAJobWaitsOnAnEightKiBStack (e2e) holds the first condition
// and prints the waiting chain's frames when it fails. Frame sizes: `go
// build -gcflags=-S ./relay/worker 2>&1 | grep STEXT` (locals=, plus 8
// bytes of return address). What grows the stack: debug.SetMaxStack(8192)
// in a test build of a worker ends it with the trace of the first
// goroutine that needed more.

// aside runs f on one of the worker's runners and waits for it: what goes
// deep (encoding/json, net/http, nats.go, log/slog) grows a runner's
// stack once, not the job's for every request.
func (w *Worker) aside(f func()) {
	done := make(chan struct{})
	w.runners.Run(func() {
		defer close(done)
		f()
	})
	<-done
}
