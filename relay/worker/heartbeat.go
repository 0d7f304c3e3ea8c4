package worker

import (
	"encoding/json"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/relaydev/relay/relay/liveness"
	"github.com/relaydev/relay/relay/wire"
)

// fullBeatEvery is how many heartbeat intervals pass between two full
// heartbeats (5s at the default interval); the beats in between, and the
// early ones, are deltas, unless a watcher asked for a full one. A watcher
// that missed a beat (it just started, reconnected, or a heartbeat was
// lost) cannot hand over the requests this worker took before until it has
// a full one: it asks, and should the request or the answer be lost too,
// this bounds the wait. A full heartbeat lists every request the worker
// holds, ~150 bytes each, so more often would cost what deltas save.
const fullBeatEvery = 10

// heartbeat publishes a worker's liveness (see package liveness): every
// interval, a heartbeat describing the requests its jobs hold, in full
// every fullBeatEvery intervals and as what changed in between; sooner
// after a job starts, so that a worker dying just after it took a request
// has that request handed over too; and a last, leaving heartbeat when it
// stops, so watchers forget it without handing anything over.
type heartbeat struct {
	every time.Duration
	beats *liveness.Beats
	jobs  *inflight
	// send publishes one heartbeat; it must not block. An error means
	// the heartbeat was not sent: the next one is full.
	send func(wire.Heartbeat) error
	// resync receives a watcher's request for a full heartbeat
	// (wire.LivenessSyncSubject). It is answered soon, but at most
	// once an interval: however many watchers ask, full heartbeats come
	// no more often than every heartbeat listed everything before deltas.
	resync <-chan struct{}
}

// run beats until stop is closed, then sends the leaving heartbeat.
func (h heartbeat) run(stop <-chan struct{}) {
	// An early beat comes at most this often: a burst of new jobs costs a
	// few heartbeats, not one each.
	minGap := h.every / 5
	tick := time.NewTicker(h.every)
	defer tick.Stop()
	var last, lastFull time.Time
	// soon fires at soonAt for an early beat.
	var soon <-chan time.Time
	var soonAt time.Time
	arm := func(wait time.Duration) {
		if at := time.Now().Add(wait); soon == nil || at.Before(soonAt) {
			soon, soonAt = time.After(wait), at
		}
	}
	// unsent: the last heartbeat was not sent; asked: a watcher asked for
	// a full one.
	ticks, unsent, asked := 0, false, false
	beat := func(full bool) {
		full = full || unsent || asked && time.Since(lastFull) >= h.every
		unsent = h.send(h.beats.Next(h.jobs.deliveries(), full)) != nil
		last, soon = time.Now(), nil
		switch {
		case full:
			lastFull, asked = last, false
		case asked:
			arm(h.every - time.Since(lastFull))
		}
	}
	// early beats within wait, or sooner if it was due sooner.
	early := func(wait time.Duration) {
		if wait <= 0 {
			beat(false)
			return
		}
		arm(wait)
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
			early(minGap - time.Since(last))
		case <-h.resync:
			asked = true
			early(max(minGap-time.Since(last), h.every-time.Since(lastFull)))
		}
	}
}

// followResyncs subscribes to watchers' requests for this worker's full
// heartbeat, on the liveness connection. Without the subscription (NATS
// refused it), watchers that lack the worker's set wait for its next
// periodic full heartbeat.
func (w *Worker) followResyncs() (resync <-chan struct{}, unsubscribe func()) {
	asked := make(chan struct{}, 1)
	sub, err := w.livenessNC.Subscribe(wire.LivenessSyncSubject, func(m *nats.Msg) {
		if len(m.Data) != 0 && string(m.Data) != w.instance {
			return
		}
		select {
		case asked <- struct{}{}:
		default:
		}
	})
	if err != nil {
		w.logger.Warn("not answering requests for full heartbeats", "err", err)
		return nil, func() {}
	}
	return asked, func() { sub.Unsubscribe() }
}

// heartbeat is the worker's liveness publisher, on the liveness
// connection; resync carries watchers' requests for a full heartbeat.
func (w *Worker) heartbeat(resync <-chan struct{}) heartbeat {
	return heartbeat{
		every:  w.heartbeatEvery,
		beats:  liveness.NewBeats(w.id, w.instance, w.livenessTimeout),
		jobs:   w.jobs,
		resync: resync,
		send: func(hb wire.Heartbeat) error {
			hb.Capacity = w.maxInflight
			data, _ := json.Marshal(hb)
			err := w.livenessNC.Publish(wire.LivenessSubject, data)
			if err != nil {
				w.logger.Debug("heartbeat not sent", "err", err)
			}
			if hb.Leaving {
				// The process may exit next: the last word must leave.
				_ = w.livenessNC.FlushTimeout(time.Second)
			}
			return err
		},
	}
}
