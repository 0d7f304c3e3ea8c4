package worker

// # The job's stack while an answer streams
//
// A job runs on its slot's goroutine, and spends nearly all its life
// waiting for the provider's next byte, deep in a call chain: slot,
// handle, run (and runFirst), answer, serve, call, attempt, read, the
// leg's next, then upstream's Stream.Next and net/http down to the socket.
// The stack that goroutine holds is a generation's largest item of memory
// in a worker.
//
// The runtime grows a stack by doubling it when a call needs more, and
// the garbage collector halves it only while the goroutine uses less than
// a quarter of it. The job's stack grows to 32 KiB while it claims the
// stream and renders frames, so it goes back to 16 KiB only if the frames
// of the waiting chain take under 8 KiB, less the runtime's guard (about
// 800 bytes). With 14.6 KiB of frames, as they were, every generation
// held 32 KiB of stack, and copied it twice as it grew.
//
// So the functions of the chain keep little in their own frames (the Go
// compiler gives a function one frame for everything it and the functions
// it inlines might need, used or not): a candidate and a delta go by
// pointer, what an attempt needs before and after its call is worked out
// in functions of their own (callContext, failedAttempt, callAgain,
// reportCall, openAttempt, endAttempt, readEnd, take), and so are the
// claim of a redelivery (claimStream), the claim of a first delivery and
// its end (startClaim, endFirst), a kept answer (replayKept) and a
// malformed or returned request (startJob, pullFailed, handBack). The
// chain now takes about 6 KiB, half of it in upstream and net/http: the
// job's stack is 16 KiB. Under 3.2 KiB, it would be 8 KiB; upstream and
// net/http alone take 3 KiB, so that is out of reach while a job reads
// its provider on its own goroutine.
//
// Frame sizes: `go build -gcflags=-S ./relay/worker 2>&1 | grep STEXT`
// (locals=, plus 16 bytes of return address and frame pointer); the
// chain as it waits: a goroutine profile of a busy worker (pprof_listen).
