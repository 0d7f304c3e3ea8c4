package liveness

import (
	"context"
	"maps"
	"math/rand/v2"
	"slices"
	"time"

	"golang.org/x/time/rate"

	"github.com/relaydev/relay/relay/wire"
)

// A watcher paces its handovers. Each is a KV write and a NAK, and each
// NAK has another worker take the request over (a claim, a read of the
// chunk log, a provider call): thousands at once would take the server
// for themselves for a while and make heartbeats late, the very thing the
// watcher judges by. So each watcher hands over at most handoverBurst at
// once and handoverRate a second after that, from a queue; what the pace
// defers waits for the next tokens, and leaves the queue only when handed
// over, when its worker is heard again (it lives, and keeps it), or at
// the AckWait horizon below (the server has moved it). Meanwhile the
// watcher keeps judging: the queue is drained by a goroutine of its own.
//
// At 1,000 a second a watcher takes at most a tenth of what it can write,
// so a few watchers cannot flood the server even when all of them judge
// wrongly (e2e/BENCHMARKS.md, "The handover pace"). Every attempt counts,
// also one that finds the handover recorded by another watcher: it is a
// KV write all the same. With several watchers, which race over the set
// in different orders, most requests move sooner, the last about as late.
const (
	// handoverRate is the handovers a watcher makes a second once its
	// burst is spent: 500 per heartbeat interval at the default 500ms.
	handoverRate = 1000
	// handoverBurst is the handovers a watcher makes at once.
	handoverBurst = 500
)

// batch is the deliveries of one judged worker still to hand over.
type batch struct {
	silentPeer
	todo     []wire.Delivery
	judged   time.Time
	deferred int // how many waited for the pace or the watcher
}

// enqueue queues what the watcher knows p held, in random order: watchers
// that judge the same worker race over its set in different orders, so
// together they move it faster than one, and waste few KV writes on
// records another already made.
func (lw *livenessWatch) enqueue(p silentPeer, now time.Time) {
	if !p.complete {
		lw.logger.Warn("some of a silent worker's deliveries are unknown (missed heartbeats); AckWait will redeliver them",
			"silent_worker", p.worker, "instance", p.instance, "silent_for", p.quiet.Round(time.Millisecond),
			"known", len(p.held), "held", p.count)
	}
	if len(p.held) == 0 {
		return
	}
	todo := slices.Collect(maps.Values(p.held))
	rand.Shuffle(len(todo), func(i, j int) { todo[i], todo[j] = todo[j], todo[i] })
	lw.mu.Lock()
	queued := 0
	for _, b := range lw.queue {
		queued += len(b.todo)
	}
	lw.queue = append(lw.queue, &batch{silentPeer: p, todo: todo, judged: now})
	lw.mu.Unlock()
	lw.logger.Info("a silent worker's requests are queued for handover", "silent_worker", p.worker, "instance", p.instance,
		"requests", len(todo), "queued_before", queued, "probe", p.verdict)
	select {
	case lw.queued <- struct{}{}:
	default:
	}
}

// A delivery is handed over only until AckWait after its worker was last
// seen: by then the server has redelivered it (the worker's last progress
// report came no later), and since a NAK is matched by the request's
// sequence only, a NAK of the old delivery would take the request from
// its new owner. A judgement held that long, or a queue deferred that
// long, leaves the rest to AckWait, which has moved them already.

// drain hands the queued deliveries over, one at a time and at the pace,
// until ctx ends. While the watcher is behind (its echo late by more than
// behindLimit), it waits: handovers then would load a server already
// late, and what a worker's heartbeat said may be stale.
func (lw *livenessWatch) drain(ctx context.Context) {
	pace := rate.NewLimiter(handoverRate, handoverBurst)
	for {
		timeout, ok := lw.nextTimeout()
		if !ok {
			select {
			case <-ctx.Done():
				return
			case <-lw.queued:
				continue
			}
		}
		waited := false
		if d := pace.Reserve().Delay(); d > 0 {
			waited = true
			if !sleep(ctx, d) {
				return
			}
		}
		for lw.behind(time.Now(), timeout) {
			waited = true
			if !sleep(ctx, watchTick) {
				return
			}
		}
		if p, d, ok := lw.pop(waited); ok {
			lw.handOver(p, d)
		}
	}
}

// nextTimeout is the timeout of the worker whose delivery is next, if
// any is queued.
func (lw *livenessWatch) nextTimeout() (time.Duration, bool) {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	if len(lw.queue) == 0 {
		return 0, false
	}
	return lw.queue[0].timeout, true
}

// behind reports whether the watcher's echo is late for a worker of this
// timeout.
func (lw *livenessWatch) behind(now time.Time, timeout time.Duration) bool {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	return lw.lag(now) > behindLimit(timeout)
}

// pop takes the next delivery to hand over, counting it as deferred if
// it waited, and logs each batch it empties or leaves to AckWait.
func (lw *livenessWatch) pop(waited bool) (silentPeer, wire.Delivery, bool) {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	now := time.Now()
	for len(lw.queue) > 0 && lw.ackWait > 0 && now.Sub(lw.queue[0].seen) >= lw.ackWait {
		b := lw.queue[0]
		lw.queue = lw.queue[1:]
		lw.logger.Info("a silent worker was last seen longer than AckWait ago; AckWait has redelivered the requests not handed over yet",
			"silent_worker", b.worker, "instance", b.instance, "left", len(b.todo), "of", len(b.held),
			"seen", now.Sub(b.seen).Round(time.Millisecond))
	}
	if len(lw.queue) == 0 {
		return silentPeer{}, wire.Delivery{}, false
	}
	b := lw.queue[0]
	d := b.todo[0]
	b.todo = b.todo[1:]
	if waited {
		b.deferred++
		lw.deferred++
	}
	if b.verdict == verdictMute {
		lw.mutedAt = now
	}
	if len(b.todo) == 0 {
		lw.queue = lw.queue[1:]
		lw.logger.Info("finished handing over a silent worker's requests", "silent_worker", b.worker, "instance", b.instance,
			"requests", len(b.held), "took", now.Sub(b.judged).Round(time.Millisecond),
			"deferred", b.deferred, "handovers_deferred", lw.deferred)
	}
	return b.silentPeer, d, true
}

// heardAgain drops the queued deliveries of instance, heard after it was
// judged silent: it lives, and holds them. lw.mu must be held.
func (lw *livenessWatch) heardAgain(instance string) {
	lw.queue = slices.DeleteFunc(lw.queue, func(b *batch) bool {
		if b.instance != instance {
			return false
		}
		lw.logger.Info("a worker judged silent was heard again; the requests not handed over yet stay with it",
			"silent_worker", b.worker, "instance", instance, "kept", len(b.todo), "of", len(b.held))
		return true
	})
}

// sleep waits for d, or until ctx ends; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
