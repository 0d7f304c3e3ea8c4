package worker

// # The job's stack while an answer streams
//
// A job runs on its slot's goroutine, and spends nearly all its life
// waiting for the provider's next byte, deep in a call chain: slot,
// handle, run (and runFirst or runClaimed), serve, call, attempt, read,
// the leg's next, then upstream's Stream.NextInto, the SSE reader and
// net/http down to the wait. The stack that goroutine holds is a
// generation's largest item of memory in a worker.
//
// The runtime grows a stack by doubling it when a call needs more than
// is left above its guard (928 bytes), and the garbage collector halves
// it only while the goroutine uses less than a quarter of it, counting
// 800 bytes for the functions that may not grow it. So a job keeps an
// 8 KiB stack only if two things hold:
//
//   - the chain it waits in takes under 3.2 KiB (4 KiB less the 800), or
//     a stack that once grew to 16 KiB stays there; and
//   - nothing it does on its own goroutine goes deeper than 7.2 KiB (8 KiB
//     less the guard), or the stack grows to 16 KiB and waits for the
//     collector to halve it again.
//
// Over HTTP/2 (a provider over TLS, or h2c) the chain takes 2.9 KiB: 1
// KiB from the SSE reader down, the rest the worker's own frames. The
// functions of the chain keep little in their own frames (the Go compiler
// gives a function one frame for everything it and the functions it
// inlines might need, used or not): a candidate and a delta go by
// pointer, an attempt's outcome is written to the caller's (a returned
// struct holds room for itself in every frame it passes), and what an
// attempt needs before and after its call is worked out in functions of
// their own (startServing, again, callContext, failedAttempt, callAgain,
// reportCall, openAttempt, endAttempt, readEnd, take, takeEarly), and so
// are the claim of a redelivery (runClaimed, claimStream), the claim of a
// first delivery and its end (startClaim, endFirst), and a malformed or
// returned request (startJob, pullFailed, handBack). Each chunk is parsed
// below the chain, in frames that hold no more than a few hundred bytes
// (upstream's parse state is pooled, not a local). What goes deeper is
// handed to the worker's runners and waited for (Worker.aside): decoding
// the request (encoding/json), opening a call (net/http goes 4 KiB deep to
// send one), the claim, and the end of the stream (its frame, the usage
// record, the ack, the log line). A runner's stack grows once, not per
// request.
//
// Over HTTP/1.1 the job reads the socket itself, 3 KiB down from the SSE
// reader, and its stack stays at 16 KiB.
//
// TestProcessAJobWaitsOnAnEightKiBStack (e2e) holds the first rule: it
// reads a worker's goroutine dump and fails with the waiting chain's
// frames if they take too much.
//
// Frame sizes: `go build -gcflags=-S ./relay/worker 2>&1 | grep STEXT`
// (locals=, plus 8 bytes of return address). The chain as it waits: run
// a worker with GOTRACEBACK=system and send it SIGQUIT; each frame's fp
// minus its sp is its size. What grows the stack: debug.SetMaxStack(8192)
// in a worker (a test build, set once it started) ends it with the trace
// of the first goroutine that needed more.
