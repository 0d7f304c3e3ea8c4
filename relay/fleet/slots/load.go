package slots

import (
	"time"

	"github.com/relaydev/relay/relay/wire"
)

// Load is what the workers' heartbeats say of the fleet's slots: each
// worker's capacity and how many requests it holds, and whose. A full
// heartbeat replaces a worker's set and a delta changes it; a delta heard
// after a lost one still applies (the next full heartbeat, every few
// seconds, sets it right), since an approximate count serves the sharing
// better than none. The zero Load is ready; it is not safe for concurrent
// use.
type Load struct {
	workers map[string]*worker // by instance
}

type worker struct {
	capacity int
	// held is the size of the set, from every heartbeat; tenants holds
	// the tenant of each request the heartbeats listed, by sequence.
	held    int
	tenants map[uint64]string
	heard   time.Time
	timeout time.Duration
}

// Observe applies heartbeat hb, heard at now. It returns the stream ids
// the heartbeat lists, which a worker has taken.
func (l *Load) Observe(hb wire.Heartbeat, now time.Time) []string {
	if l.workers == nil {
		l.workers = map[string]*worker{}
	}
	if hb.Leaving {
		delete(l.workers, hb.Instance)
		return nil
	}
	w := l.workers[hb.Instance]
	if w == nil {
		w = &worker{tenants: map[uint64]string{}}
		l.workers[hb.Instance] = w
	}
	w.capacity, w.held, w.heard, w.timeout = hb.Capacity, hb.Held, now, hb.Timeout()
	listed := hb.Added
	if hb.Full {
		clear(w.tenants)
		listed = hb.Deliveries
	}
	for _, r := range hb.Removed {
		delete(w.tenants, r.Seq)
	}
	taken := make([]string, 0, len(listed))
	for _, d := range listed {
		w.tenants[d.Seq] = d.Tenant
		taken = append(taken, d.StreamID)
	}
	return taken
}

// Expire forgets the workers not heard for three of their liveness
// timeouts: dead ones, whose requests the others have taken over.
func (l *Load) Expire(now time.Time) {
	for id, w := range l.workers {
		if now.Sub(w.heard) > 3*w.timeout {
			delete(l.workers, id)
		}
	}
}

// Tally is the fleet's capacity, the requests its workers hold, and those
// of them whose tenant is known, by tenant. A worker's requests taken
// since its last full heartbeat lost may be held unknown.
func (l *Load) Tally() (capacity, held int, byTenant map[string]int) {
	byTenant = map[string]int{}
	for _, w := range l.workers {
		capacity += w.capacity
		held += max(w.held, len(w.tenants))
		for _, t := range w.tenants {
			byTenant[t]++
		}
	}
	return capacity, held, byTenant
}
