package edge

import "time"

// # Runners: long-lived goroutines for bursts of work
//
// A taken-over SSE stream (sse_conn.go) is served in bursts: a token
// arrives, a goroutine renders it and writes it, and the stream waits
// again. A goroutine started for each burst starts on the smallest stack
// and grows it, by copying, while it renders JSON and writes to the
// socket; under load (100 streams at 25 ms a token) that growth was about
// a tenth of the edge's CPU. A runner is a goroutine that, once its burst
// is over, waits for the next one, so its stack is grown once and not per
// token.
//
// Handing a burst over never blocks and never waits behind another
// stream's: a stream whose write blocks on a slow client (for up to
// writeTimeout) holds its runner, not the others. So a burst goes to a
// runner waiting for one if there is any, and to a new runner otherwise:
// there are as many runners as bursts in progress at the busiest moment,
// no more. A runner left without work for runnerIdle exits, so the pool
// shrinks back after a burst and an idle edge holds none.
//
// (The garbage collector still shrinks the stack of a runner that waits,
// by half per cycle at most; that is one copy per cycle, not one per
// token.)

// runnerIdle is how long a runner waits for work before it exits. Tokens
// come every 10 to 100 ms a stream, so a second keeps runners through the
// pauses of a busy edge; a runner that exits and starts again costs what
// one burst on a fresh goroutine did, at most once a second, where the
// stack growth it saves came with every token. A waiting runner holds its
// stack (a few KiB) for that second.
const runnerIdle = time.Second

// runners serves jobs on long-lived goroutines.
type runners struct {
	// idle takes a job to a runner waiting for one. It is unbuffered, so
	// a send succeeds only when a runner is there to take it, and a job
	// never queues.
	idle chan func()
	// wait is how long a runner waits for a job before it exits.
	wait time.Duration
}

// newRunners returns a pool whose runners exit after waiting wait for a
// job.
func newRunners(wait time.Duration) *runners {
	return &runners{idle: make(chan func()), wait: wait}
}

// run runs job on a runner waiting for work, or on a new one if none is.
// It does not wait for job.
func (p *runners) run(job func()) {
	select {
	case p.idle <- job:
	default:
		go p.serve(job)
	}
}

// serve runs job, then each job handed to it, until none came for p.wait.
// Its one timer is reset for each wait.
func (p *runners) serve(job func()) {
	t := time.NewTimer(p.wait)
	defer t.Stop()
	for {
		job()
		// Since Go 1.23 Reset leaves no stale expiry in t.C.
		t.Reset(p.wait)
		select {
		case job = <-p.idle:
		case <-t.C:
			return
		}
	}
}
