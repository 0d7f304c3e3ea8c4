package relay

import (
	"time"

	"github.com/relaydev/relay/relay/protocol"
)

// heartbeat publishes a worker's liveness (see protocol "Worker
// liveness"): every interval, a heartbeat listing the requests its jobs
// hold; sooner after a job starts, so that a worker dying just after it
// took a request has that request handed over too; and a last, leaving
// heartbeat when it stops, so watchers forget it without handing anything
// over.
type heartbeat struct {
	every time.Duration
	// base is every heartbeat's Worker, Instance and TimeoutMS.
	base protocol.Heartbeat
	jobs *inflight
	// send publishes one heartbeat; it must not block.
	send func(protocol.Heartbeat)
}

// run beats until stop is closed, then sends the leaving heartbeat.
func (h heartbeat) run(stop <-chan struct{}) {
	// An early beat comes at most this often: a burst of new jobs costs a
	// few heartbeats, not one each.
	minGap := h.every / 5
	tick := time.NewTicker(h.every)
	defer tick.Stop()
	var last time.Time
	var soon <-chan time.Time
	beat := func() {
		hb := h.base
		hb.Deliveries = h.jobs.deliveries()
		h.send(hb)
		last, soon = time.Now(), nil
	}
	beat()
	for {
		select {
		case <-stop:
			hb := h.base
			hb.Leaving = true
			h.send(hb)
			return
		case <-tick.C:
			beat()
		case <-soon:
			beat()
		case <-h.jobs.added:
			switch wait := minGap - time.Since(last); {
			case wait <= 0:
				beat()
			case soon == nil:
				soon = time.After(wait)
			}
		}
	}
}
