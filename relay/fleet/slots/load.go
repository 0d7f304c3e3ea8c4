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
// better than none. The totals are kept as the heartbeats change them, so
// that a decision costs the number of tenants, not of requests. The zero
// Load is ready; it is not safe for concurrent use.
type Load struct {
	workers map[string]*worker // by instance
	// capacity and held are the sums of the workers' contributions;
	// byTenant counts the requests of known tenant, by tenant.
	capacity, held int
	byTenant       map[string]int
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

// counted is what w adds to the held total: its own count, or the
// requests listed if more (a delta's count can lag what it listed).
func (w *worker) counted() int { return max(w.held, len(w.tenants)) }

// Observe applies hb, heard at now. It returns the stream ids the
// heartbeat lists, which a worker has taken.
func (l *Load) Observe(hb wire.Heartbeat, now time.Time) []string {
	if l.workers == nil {
		l.workers = map[string]*worker{}
		l.byTenant = map[string]int{}
	}
	w := l.workers[hb.Instance]
	if hb.Leaving {
		if w != nil {
			l.forget(hb.Instance, w)
		}
		return nil
	}
	if w == nil {
		w = &worker{tenants: map[uint64]string{}}
		l.workers[hb.Instance] = w
	}
	l.capacity -= w.capacity
	l.held -= w.counted()
	listed := hb.Added
	if hb.Full {
		for seq := range w.tenants {
			l.untrack(w, seq)
		}
		listed = hb.Deliveries
	}
	for _, r := range hb.Removed {
		l.untrack(w, r.Seq)
	}
	taken := make([]string, 0, len(listed))
	for _, d := range listed {
		l.untrack(w, d.Seq)
		w.tenants[d.Seq] = d.Tenant
		l.byTenant[d.Tenant]++
		taken = append(taken, d.StreamID)
	}
	w.capacity, w.held, w.heard, w.timeout = hb.Capacity, hb.Held, now, hb.Timeout()
	l.capacity += w.capacity
	l.held += w.counted()
	return taken
}

// untrack takes request seq out of w's set, if it is there.
func (l *Load) untrack(w *worker, seq uint64) {
	t, ok := w.tenants[seq]
	if !ok {
		return
	}
	delete(w.tenants, seq)
	if l.byTenant[t]--; l.byTenant[t] <= 0 {
		delete(l.byTenant, t)
	}
}

// forget takes worker id out of the load.
func (l *Load) forget(id string, w *worker) {
	l.capacity -= w.capacity
	l.held -= w.counted()
	for seq := range w.tenants {
		l.untrack(w, seq)
	}
	delete(l.workers, id)
}

// Expire forgets the workers not heard for three of their liveness
// timeouts: dead ones, whose requests the others have taken over.
func (l *Load) Expire(now time.Time) {
	for id, w := range l.workers {
		if now.Sub(w.heard) > 3*w.timeout {
			l.forget(id, w)
		}
	}
}

// Tally is the fleet's capacity, the requests its workers hold, and those
// of them whose tenant is known, by tenant. A worker's requests taken
// since its last full heartbeat lost may be held unknown. The map is the
// Load's own: read it before the next Observe or Expire.
func (l *Load) Tally() (capacity, held int, byTenant map[string]int) {
	return l.capacity, l.held, l.byTenant
}
