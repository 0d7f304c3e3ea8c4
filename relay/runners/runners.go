// Package runners serves bursts of work on long-lived goroutines, so that
// a goroutine's stack grows once and not for every burst.
//
// An edge's taken-over SSE stream (edge/serve_sse_conn.go) is served in bursts: a token
// arrives, a goroutine renders it and writes it, and the stream waits
// again. A goroutine started for each burst starts on the smallest stack
// and grows it, by copying, while it renders JSON and writes to the
// socket; under load (100 streams at 25 ms a token) copying stacks as they
// grew was about a tenth of the edge's processor time. A runner is a
// goroutine that, once its burst is over, waits for the next one, so its
// stack is grown once and not per token.
//
// Handing a burst over never waits for a runner, nor behind another
// stream's burst: a stream whose write blocks on a slow client (for up to
// writeTimeout) holds its runner, not the others. So a burst goes to a
// runner waiting for one if there is any, and to a new runner otherwise.
// A runner left without work for a while (Idle) exits, so the pool
// shrinks back after a burst and an idle process holds none. That is also
// how they end with the edge: after Serve returned, within Idle; nothing
// stops them sooner, as a stream still ending (its shutdown ran out of
// time) may yet need one.
//
// The runner handed a burst is the one that waited least (the idle list
// is a stack), so that under a steady load the runners beyond what it
// needs wait at the bottom and exit. Handed round in turn, as an unbuffered
// channel's waiting receivers are, every runner made at the busiest moment
// would get a burst often enough to stay, each holding its grown stack.
//
// (The garbage collector still halves the stack of a waiting runner that
// uses less than a quarter of it, once a cycle at most; that is one growth
// a runner a cycle, not one a token.)
//
// The worker uses the same pool for the appends of its generations'
// chunks (a goroutine per attempt held a stack for every generation in
// flight, where the appends of all of them need a few runners at a time),
// and for what a job does that goes deep, so that the job's own stack stays
// small while it waits for its provider (relay/worker/stack.go).
package runners

import (
	"sync"
	"time"
)

// Idle is how long a runner waits for work before it exits. Tokens
// come every 10 to 100 ms a stream, so a second keeps runners through the
// pauses of a busy edge; a runner that exits and starts again costs what
// one burst on a fresh goroutine did, at most once a second, where the
// stack growth it saves came with every token. A waiting runner holds its
// stack (about 10 KiB at 100 streams) for that second.
const Idle = time.Second

// Pool serves jobs on long-lived goroutines.
type Pool struct {
	// wait is how long a runner waits for a job before it exits.
	wait time.Duration

	mu sync.Mutex // held only to push, pop or unlink a runner
	// top is the runner that waits for a job since the shortest time, the
	// top of a stack linked by runner.below.
	top *runner
}

// runner is one of the pool's goroutines.
type runner struct {
	// job takes the job a runner is handed; it has room for one, so that
	// the handing never blocks.
	job chan func()
	// below and above link the runners waiting for a job, while waiting
	// is set; a runner is unlinked (by whoever takes it off) before it is
	// handed a job.
	below, above *runner
	waiting      bool
}

// New returns a pool whose runners exit after waiting wait for a job
// (Idle: a second).
func New(wait time.Duration) *Pool {
	return &Pool{wait: wait}
}

// Run runs job on the runner that waited least for work, or on a new one if
// none waits. It does not wait for job.
func (p *Pool) Run(job func()) {
	p.mu.Lock()
	r := p.top
	if r != nil {
		p.unlink(r)
	}
	p.mu.Unlock()
	if r == nil {
		go p.serve(job)
		return
	}
	r.job <- job
}

// serve runs job, then each job handed to it, until none came for p.wait.
// Its one timer is reset for each wait.
func (p *Pool) serve(job func()) {
	r := &runner{job: make(chan func(), 1)}
	t := time.NewTimer(p.wait)
	defer t.Stop()
	for {
		job()
		p.mu.Lock()
		r.below, p.top = p.top, r
		if r.below != nil {
			r.below.above = r
		}
		r.waiting = true
		p.mu.Unlock()
		// Since Go 1.23 Reset leaves no stale expiry in t.C.
		t.Reset(p.wait)
		select {
		case job = <-r.job:
			continue
		case <-t.C:
		}
		p.mu.Lock()
		taken := !r.waiting
		if !taken {
			p.unlink(r)
		}
		p.mu.Unlock()
		if !taken {
			return
		}
		// Taken off the list just as the wait ended: the job is on its way.
		job = <-r.job
	}
}

// Waiting is how many runners wait for a job.
func (p *Pool) Waiting() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for r := p.top; r != nil; r = r.below {
		n++
	}
	return n
}

// unlink takes r off the list of waiting runners; p.mu is held.
func (p *Pool) unlink(r *runner) {
	if r.above != nil {
		r.above.below = r.below
	} else {
		p.top = r.below
	}
	if r.below != nil {
		r.below.above = r.above
	}
	r.below, r.above, r.waiting = nil, nil, false
}
