package relay

import (
	"time"

	"github.com/relaydev/relay/relay/protocol"
)

// fullBeatEvery is how many heartbeat intervals pass between two full
// heartbeats (5s at the default interval); the beats in between, and the
// early ones, are deltas. It bounds how long a watcher that missed a beat
// (it just started, reconnected, or a heartbeat was lost) cannot hand this
// worker's requests over: until then, AckWait is their fallback. A full
// heartbeat lists every request the worker holds, ~150 bytes each, so
// more often would cost what deltas save.
const fullBeatEvery = 10

// heartbeat publishes a worker's liveness (see protocol "Worker
// liveness"): every interval, a heartbeat describing the requests its jobs
// hold, in full every fullBeatEvery intervals and as what changed in
// between; sooner after a job starts, so that a worker dying just after it
// took a request has that request handed over too; and a last, leaving
// heartbeat when it stops, so watchers forget it without handing anything
// over.
type heartbeat struct {
	every time.Duration
	beats *protocol.Beats
	jobs  *inflight
	// send publishes one heartbeat; it must not block. An error means
	// the heartbeat was not sent: the next one is full.
	send func(protocol.Heartbeat) error
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
	ticks, resync := 0, false
	beat := func(full bool) {
		resync = h.send(h.beats.Next(h.jobs.deliveries(), full || resync)) != nil
		last, soon = time.Now(), nil
	}
	beat(true)
	for {
		select {
		case <-stop:
			_ = h.send(h.beats.Leaving())
			return
		case <-tick.C:
			ticks++
			beat(ticks%fullBeatEvery == 0)
		case <-soon:
			beat(false)
		case <-h.jobs.added:
			switch wait := minGap - time.Since(last); {
			case wait <= 0:
				beat(false)
			case soon == nil:
				soon = time.After(wait)
			}
		}
	}
}
