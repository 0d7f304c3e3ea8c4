package worker

import (
	"slices"
	"sync"
	"time"
)

// runners runs the worker's publishers (publisher.go) on goroutines shared
// by every job, instead of one goroutine per attempt. A publisher has work
// only for a moment per token (one append to the chunk log, a round trip
// to NATS) and waits for the next token for most of its life; a goroutine
// of its own held a stack (8 KiB once the collector shrank it) for that
// wait, in every generation in flight. A runner is a goroutine that, its
// job done, waits for the next one, so its stack grows once, not per
// burst; one that waited runnerIdle without work exits.
//
// Handing a job over never waits for a runner, nor behind another job: an
// append may retry for as long as NATS is away, holding its runner, not
// the others. So a job goes to a runner that waits if there is one, and
// to a new one otherwise. The runner handed a job is the one that waited
// least (idle is a stack), so that under a steady load the runners beyond
// what it needs wait at the bottom and exit; handed round in turn, every
// runner made at the busiest moment would get a job often enough to stay.
type runners struct {
	wait time.Duration

	mu sync.Mutex
	// idle are the runners waiting for a job, the one that waited least
	// last.
	idle []*runner
}

// runnerIdle is how long a runner waits for a job before it exits: a
// stream's tokens come every few milliseconds to a second or so, and a
// runner that exits and starts again costs no more than a goroutine per
// burst did, at most once a second.
const runnerIdle = time.Second

type runner struct {
	// job has room for one, so that handing a job over never blocks.
	job chan func()
}

func newRunners(wait time.Duration) *runners { return &runners{wait: wait} }

// run runs job on a runner; it does not wait for job.
func (p *runners) run(job func()) {
	p.mu.Lock()
	var r *runner
	if n := len(p.idle); n > 0 {
		r = p.idle[n-1]
		p.idle = p.idle[:n-1]
	}
	p.mu.Unlock()
	if r == nil {
		go p.serve(job)
		return
	}
	r.job <- job
}

// serve runs job, then each job handed to it, until none came for p.wait.
func (p *runners) serve(job func()) {
	r := &runner{job: make(chan func(), 1)}
	t := time.NewTimer(p.wait)
	defer t.Stop()
	for {
		job()
		p.mu.Lock()
		p.idle = append(p.idle, r)
		p.mu.Unlock()
		t.Reset(p.wait)
		select {
		case job = <-r.job:
			continue
		case <-t.C:
		}
		p.mu.Lock()
		i := slices.Index(p.idle, r)
		if i >= 0 {
			p.idle = slices.Delete(p.idle, i, i+1)
		}
		p.mu.Unlock()
		if i >= 0 {
			return
		}
		// Taken off the stack as the wait ran out: its job is on the way.
		job = <-r.job
	}
}
