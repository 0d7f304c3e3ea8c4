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
	// taken holds, by stream, the requests taken from an offer whose job
	// has no delivery yet (offer.go).
	taken map[string]*takenOffer
	// keep starts the progress reports on an adopted delivery.
	keep func(ackable) (stop func())
	// handingOver is set once the worker hands every stream over; a job
	// added later is stopped at once.
	handingOver bool
	// added is signalled (capacity 1) when a job is added or adopts a
	// delivery, so that the next heartbeat lists it soon.
	added chan struct{}
}

// takenOffer is a request taken from an offer, from the moment the offer
// is answered: a delivery passed on before the slot added the job waits
// here for it.
type takenOffer struct {
	job *job
	msg ackable
	d   wire.Delivery
}

func newInflight(keep func(ackable) (stop func())) *inflight {
	return &inflight{jobs: map[*job]struct{}{}, taken: map[string]*takenOffer{}, keep: keep, added: make(chan struct{}, 1)}
}

// expect records that the request of stream id was taken from an offer,
// before the offer is answered: its delivery is adopted from then on.
func (in *inflight) expect(id string) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.taken[id] == nil {
		in.taken[id] = &takenOffer{}
	}
}

// drop forgets a request taken from an offer whose job never started,
// and returns the delivery passed on meanwhile (Reply empty if none), for
// the caller to give back.
func (in *inflight) drop(id string) wire.Delivery {
	in.mu.Lock()
	defer in.mu.Unlock()
	t := in.taken[id]
	if t == nil || t.job != nil {
		return wire.Delivery{}
	}
	delete(in.taken, id)
	return t.d
}

func (in *inflight) add(j *job) {
	in.mu.Lock()
	in.jobs[j] = struct{}{}
	if j.offered {
		t := in.taken[j.req.StreamID]
		if t == nil {
			t = &takenOffer{}
			in.taken[j.req.StreamID] = t
		}
		t.job = j
		if t.msg != nil {
			in.adoptLocked(j, t.d, t.msg)
		}
	}
	handingOver := in.handingOver
	in.mu.Unlock()
	if handingOver {
		j.stopCall(errHandover)
	}
	in.signal()
}

// signal tells the heartbeat that the deliveries changed, so that the
// next beat lists them soon.
func (in *inflight) signal() {
	select {
	case in.added <- struct{}{}:
	default:
	}
}

func (in *inflight) remove(j *job) {
	in.mu.Lock()
	defer in.mu.Unlock()
	delete(in.jobs, j)
	in.forget(j)
}

// forget drops j from the jobs that may adopt a delivery.
func (in *inflight) forget(j *job) {
	if t := in.taken[j.req.StreamID]; t != nil && t.job == j {
		delete(in.taken, j.req.StreamID)
	}
}

// adopt gives d, a delivery acknowledged through msg, to the job of its
// stream taken from an offer, or keeps it for that job until the slot
// adds it; a job that has one already, or settled (it ended, handed over
// or gave the stream up), adopts none. It reports whether d was adopted.
func (in *inflight) adopt(d wire.Delivery, msg ackable) bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	t := in.taken[d.StreamID]
	switch {
	case t == nil:
		return false
	case t.job == nil:
		if t.msg != nil {
			return false
		}
		t.msg, t.d = msg, d
		return true
	case t.job.settled:
		return false
	}
	in.adoptLocked(t.job, d, msg)
	in.signal()
	return true
}

// adoptLocked gives j its delivery d; in.mu is held.
func (in *inflight) adoptLocked(j *job, d wire.Delivery, msg ackable) {
	in.forget(j)
	d.Tenant = j.req.Tenant
	j.msg, j.delivery, j.stopProgress = msg, d, in.keep(msg)
}

// release marks j settled, stops its progress reports and returns its
// delivery (see job.release).
func (in *inflight) release(j *job) (ackable, wire.Delivery) {
	in.mu.Lock()
	j.settled = true
	in.forget(j)
	msg, d, stop := j.msg, j.delivery, j.stopProgress
	in.mu.Unlock()
	stop()
	return msg, d
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
