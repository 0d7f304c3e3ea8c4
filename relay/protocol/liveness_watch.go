package protocol

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
)

// Watcher hands over the deliveries of worker instances whose heartbeats
// stopped (see "Worker liveness"). Any number may run: HandOver makes
// each handover happen once.
type Watcher struct {
	// JS reaches HandoverBucket; its connection receives heartbeats and
	// sends NAKs. Required.
	JS jetstream.JetStream
	// Topology sizes HandoverBucket if the watcher creates it.
	Topology Topology
	// Self is the instance of the worker running the watcher, whose own
	// heartbeats are ignored; empty for a coordinator.
	Self string
	// Name identifies the watcher in handover records and logs.
	Name string
	// Logger receives one line per handover; nil discards.
	Logger *slog.Logger
}

const (
	// watchTick is how often a watcher looks for silent workers: the
	// handover comes at most this late after the declared timeout.
	watchTick = 50 * time.Millisecond
	// watchDeaf is how long a watcher may go without hearing its own echo
	// and still judge others. Silent itself for longer (its connection
	// down or stalled, the process paused or starved), it has not heard
	// what it should have, so it restarts every worker's clock instead.
	watchDeaf = 10 * watchTick
	// handoverTimeout bounds recording and sending one handover.
	handoverTimeout = 5 * time.Second
)

// Run watches until ctx ends. It returns an error only if it cannot
// subscribe or set up HandoverBucket at start.
func (w Watcher) Run(ctx context.Context) error {
	if w.Logger == nil {
		w.Logger = slog.New(slog.DiscardHandler)
	}
	nc := w.JS.Conn()
	kv, err := OpenHandovers(ctx, w.JS, w.Topology)
	if err != nil {
		return err
	}
	lw := newLivenessWatch(w.Self, func(silent Heartbeat, d Delivery, quiet time.Duration) {
		hctx, cancel := context.WithTimeout(ctx, handoverTimeout)
		defer cancel()
		err := HandOver(hctx, nc, kv, d, w.Name)
		switch {
		case errors.Is(err, ErrHandedOver):
			w.Logger.Debug("delivery of a silent worker already handed over", "silent_worker", silent.Worker, "stream", d.StreamID)
		case err != nil:
			if ctx.Err() == nil {
				w.Logger.Warn("hand over failed; AckWait will redeliver", "silent_worker", silent.Worker, "stream", d.StreamID, "err", err)
			}
		default:
			w.Logger.Info("handed over a silent worker's request", "silent_worker", silent.Worker, "instance", silent.Instance,
				"stream", d.StreamID, "silent_for", quiet.Round(time.Millisecond))
		}
	})
	// The echo is a message to itself through the server: hearing it
	// proves the watcher hears the world now.
	echo := livenessEchoPrefix + nuid.Next()
	echoSub, err := nc.Subscribe(echo, func(*nats.Msg) { lw.echoed() })
	if err != nil {
		return fmt.Errorf("protocol: subscribe %s: %w", echo, err)
	}
	defer echoSub.Unsubscribe()
	lw.ping = func() { _ = nc.Publish(echo, nil) }
	sub, err := nc.Subscribe(LivenessSubject, func(m *nats.Msg) {
		var hb Heartbeat
		if err := json.Unmarshal(m.Data, &hb); err != nil || hb.Instance == "" {
			w.Logger.Warn("malformed heartbeat", "err", err)
			return
		}
		lw.observe(hb)
	})
	if err != nil {
		return fmt.Errorf("protocol: subscribe %s: %w", LivenessSubject, err)
	}
	defer sub.Unsubscribe()
	w.Logger.Info("watching worker liveness", "watcher", w.Name)
	lw.run(ctx)
	return nil
}

// livenessWatch is the watcher's clockwork, apart from NATS: it keeps when
// each worker instance was last heard and hands the deliveries of silent
// ones to handOver, one at a time, from run's goroutine.
type livenessWatch struct {
	self     string
	handOver func(silent Heartbeat, d Delivery, quiet time.Duration)
	// ping sends the watcher an echo, which calls echoed when it comes
	// back.
	ping func()

	mu     sync.Mutex
	peers  map[string]*peer // by instance
	echoAt time.Time        // when the last echo came back
}

type peer struct {
	last  Heartbeat
	heard time.Time // when last was received, or the watcher's view reset
}

func newLivenessWatch(self string, handOver func(Heartbeat, Delivery, time.Duration)) *livenessWatch {
	return &livenessWatch{self: self, handOver: handOver, ping: func() {}, peers: map[string]*peer{}}
}

// observe records a heartbeat as heard now.
func (lw *livenessWatch) observe(hb Heartbeat) {
	if hb.Instance == lw.self {
		return
	}
	lw.mu.Lock()
	defer lw.mu.Unlock()
	if hb.Leaving {
		delete(lw.peers, hb.Instance)
		return
	}
	lw.peers[hb.Instance] = &peer{last: hb, heard: time.Now()}
}

// echoed records that an echo came back now.
func (lw *livenessWatch) echoed() {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	lw.echoAt = time.Now()
}

// run pings itself and checks for silent workers every watchTick until
// ctx ends.
func (lw *livenessWatch) run(ctx context.Context) {
	tick := time.NewTicker(watchTick)
	defer tick.Stop()
	lw.mu.Lock()
	lw.echoAt = time.Now()
	lw.mu.Unlock()
	for {
		lw.ping()
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		for _, p := range lw.silent(time.Now()) {
			for _, d := range p.last.Deliveries {
				if ctx.Err() != nil {
					return
				}
				lw.handOver(p.last, d, p.quiet)
			}
		}
	}
}

// silentPeer is a worker not heard from within its timeout.
type silentPeer struct {
	last  Heartbeat
	quiet time.Duration
}

// silent removes and returns the workers not heard from within their
// declared timeout. A watcher that did not hear its own echo lately
// judges no one: it restarts every worker's clock at now instead.
func (lw *livenessWatch) silent(now time.Time) []silentPeer {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	if now.Sub(lw.echoAt) > watchDeaf {
		for _, p := range lw.peers {
			p.heard = now
		}
		return nil
	}
	var out []silentPeer
	for instance, p := range lw.peers {
		if quiet := now.Sub(p.heard); quiet > p.last.Timeout() {
			out = append(out, silentPeer{last: p.last, quiet: quiet})
			delete(lw.peers, instance)
		}
	}
	return out
}
