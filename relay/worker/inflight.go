package worker

import (
	"errors"
	"sync"

	"github.com/relaydev/relay/relay/wire"
)

// Why a job's upstream call was stopped (context.Cause of its call
// context).
var (
	// errCancelled: a client cancelled the stream (protocol CancelSubject
	// or Meta.Cancelled). The job ends it cancelled.
	errCancelled = errors.New("worker: stream cancelled by the client")
	// errHandover: the worker is draining and its deadline passed, or it
	// is stopping. The job stops without an end frame and hands the
	// request to another worker at once.
	errHandover = errors.New("worker: stream handed over by a stopping worker")
)

// inflight is the set of jobs a worker runs: what its heartbeats list,
// where cancel notices are routed, and what a drain hands over when its
// time is up.
type inflight struct {
	mu   sync.Mutex
	jobs map[*job]struct{}
	// handingOver is set once the worker hands every stream over; a job
	// added later is stopped at once.
	handingOver bool
	// added is signalled (capacity 1) when a job is added, so that the
	// next heartbeat lists it soon.
	added chan struct{}
}

func newInflight() *inflight {
	return &inflight{jobs: map[*job]struct{}{}, added: make(chan struct{}, 1)}
}

func (in *inflight) add(j *job) {
	in.mu.Lock()
	in.jobs[j] = struct{}{}
	handingOver := in.handingOver
	in.mu.Unlock()
	if handingOver {
		j.stopCall(errHandover)
	}
	select {
	case in.added <- struct{}{}:
	default:
	}
}

func (in *inflight) remove(j *job) {
	in.mu.Lock()
	defer in.mu.Unlock()
	delete(in.jobs, j)
}

// deliveries lists the requests the jobs hold, for a heartbeat.
func (in *inflight) deliveries() []wire.Delivery {
	in.mu.Lock()
	defer in.mu.Unlock()
	out := make([]wire.Delivery, 0, len(in.jobs))
	for j := range in.jobs {
		if j.delivery.Seq != 0 {
			out = append(out, j.delivery)
		}
	}
	return out
}

// cancel stops the jobs of a stream because its client cancelled it.
// Several jobs of one stream can run for a moment on one worker (a
// takeover by a sibling slot); all are told.
func (in *inflight) cancel(streamID string) int {
	in.mu.Lock()
	defer in.mu.Unlock()
	n := 0
	for j := range in.jobs {
		if j.req.StreamID == streamID {
			j.stopCall(errCancelled)
			n++
		}
	}
	return n
}

// handOverAll stops every job, and every job added later, so that each
// hands its request over.
func (in *inflight) handOverAll() int {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.handingOver = true
	for j := range in.jobs {
		j.stopCall(errHandover)
	}
	return len(in.jobs)
}

func (in *inflight) len() int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return len(in.jobs)
}
