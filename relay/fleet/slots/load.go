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
	// held is the size of the set, from every heartbeat; listed holds
	// the stream and tenant of each request the heartbeats listed, by
	// sequence.
	held    int
	listed  map[uint64]listed
	heard   time.Time
	timeout time.Duration
}

// listed is one request a heartbeat listed.
type listed struct{ stream, tenant string }

// Seen is what a heartbeat, or a worker's silence, changed of the streams
// the workers hold: the edge that let a generation start follows it from
// the queue to its end by these.
type Seen struct {
	// Taken are the streams a heartbeat listed.
	Taken []string
	// Ended are those a worker no longer holds: their answer ended.
	Ended []string
	// Orphaned are those of a worker that left or fell silent: they are
	// handed over, and another worker lists them once it took them.
	Orphaned []string
}

// counted is what w adds to the held total: its own count, or the
// requests listed if more (a delta's count can lag what it listed).
func (w *worker) counted() int { return max(w.held, len(w.listed)) }

// Observe applies hb, heard at now.
func (l *Load) Observe(hb wire.Heartbeat, now time.Time) Seen {
	if l.workers == nil {
		l.workers = map[string]*worker{}
		l.byTenant = map[string]int{}
	}
	w := l.workers[hb.Instance]
	if hb.Leaving {
		if w != nil {
			return Seen{Orphaned: l.forget(hb.Instance, w)}
		}
		return Seen{}
	}
	if w == nil {
		w = &worker{listed: map[uint64]listed{}}
		l.workers[hb.Instance] = w
	}
	l.capacity -= w.capacity
	l.held -= w.counted()
	var gone []string
	list := hb.Added
	if hb.Full {
		for seq := range w.listed {
			gone = append(gone, l.untrack(w, seq))
		}
		list = hb.Deliveries
	}
	for _, r := range hb.Removed {
		if id := l.untrack(w, r.Seq); id != "" {
			gone = append(gone, id)
		}
	}
	var seen Seen
	still := make(map[string]bool, len(list))
	for _, d := range list {
		l.untrack(w, d.Seq)
		w.listed[d.Seq] = listed{stream: d.StreamID, tenant: d.Tenant}
		l.byTenant[d.Tenant]++
		seen.Taken = append(seen.Taken, d.StreamID)
		still[d.StreamID] = true
	}
	// A stream delivered again under a new sequence is still held.
	for _, id := range gone {
		if !still[id] {
			seen.Ended = append(seen.Ended, id)
		}
	}
	w.capacity, w.held, w.heard, w.timeout = hb.Capacity, hb.Held, now, hb.Timeout()
	l.capacity += w.capacity
	l.held += w.counted()
	return seen
}

// untrack takes request seq out of w's set, if it is there, and returns
// its stream ("" if it was not).
func (l *Load) untrack(w *worker, seq uint64) string {
	r, ok := w.listed[seq]
	if !ok {
		return ""
	}
	delete(w.listed, seq)
	if l.byTenant[r.tenant]--; l.byTenant[r.tenant] <= 0 {
		delete(l.byTenant, r.tenant)
	}
	return r.stream
}

// forget takes worker id out of the load and returns the streams it held.
func (l *Load) forget(id string, w *worker) []string {
	l.capacity -= w.capacity
	l.held -= w.counted()
	streams := make([]string, 0, len(w.listed))
	for seq := range w.listed {
		streams = append(streams, l.untrack(w, seq))
	}
	delete(l.workers, id)
	return streams
}

// Expire forgets the workers not heard for three of their liveness
// timeouts: dead ones, whose requests the others take over. It returns
// the streams they held.
func (l *Load) Expire(now time.Time) (orphaned []string) {
	for id, w := range l.workers {
		if now.Sub(w.heard) > 3*w.timeout {
			orphaned = append(orphaned, l.forget(id, w)...)
		}
	}
	return orphaned
}

// Tally is the fleet's capacity, the requests its workers hold, and those
// of them whose tenant is known, by tenant. A worker's requests taken
// since its last full heartbeat lost may be held unknown. The map is the
// Load's own: read it before the next Observe or Expire.
func (l *Load) Tally() (capacity, held int, byTenant map[string]int) {
	return l.capacity, l.held, l.byTenant
}
