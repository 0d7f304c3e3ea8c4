package liveness

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/relaydev/relay/relay/streams"
	"github.com/relaydev/relay/relay/wire"
)

// Watcher hands over the deliveries of worker instances whose heartbeats
// stopped (see "Worker liveness"). Any number may run: HandOver makes
// each handover happen once.
type Watcher struct {
	// JS reaches HandoverBucket; its connection sends the NAKs. Required.
	JS jetstream.JetStream
	// NC receives the heartbeats and the watcher's echo: a connection of
	// their own, so that a busy or stalled main connection cannot delay
	// them. Nil: JS's connection.
	NC *nats.Conn
	// Topology sizes HandoverBucket if the watcher creates it.
	Topology streams.Topology
	// Self is the instance of the worker running the watcher, whose own
	// heartbeats are ignored; empty for a coordinator.
	Self string
	// Name identifies the watcher in handover records and logs.
	Name string
	// Logger receives one line per handover, and the judgements held and
	// handovers deferred (hold.go, pace.go); nil discards.
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
	naks := w.JS.Conn()
	nc := cmp.Or(w.NC, naks)
	kv, err := streams.OpenHandovers(ctx, w.JS, w.Topology)
	if err != nil {
		return err
	}
	lw := newLivenessWatch(w.Self, w.Logger, func(silent silentPeer, d wire.Delivery) {
		hctx, cancel := context.WithTimeout(ctx, handoverTimeout)
		defer cancel()
		err := HandOver(hctx, naks, kv, d, w.Name)
		switch {
		case errors.Is(err, ErrHandedOver):
			w.Logger.Debug("delivery of a silent worker already handed over", "silent_worker", silent.worker, "stream", d.StreamID)
		case err != nil:
			if ctx.Err() == nil {
				w.Logger.Warn("hand over failed; AckWait will redeliver", "silent_worker", silent.worker, "stream", d.StreamID, "err", err)
			}
		default:
			w.Logger.Info("handed over a silent worker's request", "silent_worker", silent.worker, "instance", silent.instance,
				"stream", d.StreamID, "silent_for", silent.quiet.Round(time.Millisecond), "probe", silent.verdict)
		}
	})
	lw.ackWait = w.Topology.WithDefaults().AckWait
	// The echo is a message to itself through the server: hearing it
	// proves the watcher hears the world now, and how late it comes says
	// how far behind the watcher or the server is. It carries when it was
	// sent, on the monotonic clock, as the time since base.
	echo := livenessEchoPrefix + nuid.Next()
	base := time.Now()
	echoSub, err := nc.Subscribe(echo, func(m *nats.Msg) {
		if since, err := strconv.ParseInt(string(m.Data), 10, 64); err == nil {
			lw.echoed(base.Add(time.Duration(since)))
		}
	})
	if err != nil {
		return fmt.Errorf("liveness: subscribe %s: %w", echo, err)
	}
	defer echoSub.Unsubscribe()
	lw.ping = func(sent time.Time) { _ = nc.Publish(echo, strconv.AppendInt(nil, int64(sent.Sub(base)), 10)) }
	lw.probe = func(ctx context.Context, instance string) verdict { return probe(ctx, nc, instance) }
	lw.sync = func(instance string) { _ = nc.Publish(wire.LivenessSyncSubject, []byte(instance)) }
	sub, err := nc.Subscribe(wire.LivenessSubject, func(m *nats.Msg) {
		var hb wire.Heartbeat
		if err := json.Unmarshal(m.Data, &hb); err != nil || hb.Instance == "" {
			w.Logger.Warn("malformed heartbeat", "err", err)
			return
		}
		lw.observe(hb)
	})
	if err != nil {
		return fmt.Errorf("liveness: subscribe %s: %w", wire.LivenessSubject, err)
	}
	defer sub.Unsubscribe()
	// Heartbeats lost on the way in leave no gap to see for a worker
	// that never beats again: a reconnect or a message dropped by the
	// subscription makes the watcher forget every set.
	lw.losses = func() uint64 {
		dropped, _ := sub.Dropped()
		return nc.Stats().Reconnects + uint64(max(dropped, 0))
	}
	w.Logger.Info("watching worker liveness", "watcher", w.Name)
	lw.run(ctx)
	return nil
}

// livenessWatch is the watcher's clockwork, apart from NATS: it keeps when
// each worker instance was last heard and which deliveries it holds, and
// hands the deliveries of silent ones to handOver, one at a time and at
// a pace (pace.go), from a goroutine of run's.
type livenessWatch struct {
	self     string
	logger   *slog.Logger
	handOver func(silent silentPeer, d wire.Delivery)
	// ping sends the watcher an echo stamped sent, which calls echoed
	// with the stamp when it comes back.
	ping func(sent time.Time)
	// losses counts the occasions on which heartbeats may have been lost
	// on the way to the watcher (reconnects, dropped messages).
	losses func() uint64
	// sync asks an instance (every one if empty) for a full heartbeat.
	sync func(instance string)
	// probe asks a silent instance whether it lives (probe.go), until
	// ctx ends.
	probe func(ctx context.Context, instance string) verdict

	mu    sync.Mutex
	peers map[string]*peer // by instance
	// echoAt is when the last echo came back, echoSent when the newest
	// one that came back was sent.
	echoAt, echoSent time.Time
	// mutedAt is when the watcher last judged, or handed over a request
	// of, a worker on a timed-out probe; slowAt when a probe last came
	// back slowly, after slowTook (hold.go).
	mutedAt, slowAt time.Time
	slowTook        time.Duration
	// queue is the deliveries of judged workers still to hand over
	// (pace.go); queued wakes the goroutine that drains it.
	queue  []*batch
	queued chan struct{}
	// ackWait is the worker consumer's: a worker's deliveries are no
	// longer its own AckWait after it was last seen (pace.go). Zero: no
	// limit.
	ackWait time.Duration
	// held counts the judgements held, deferred the handovers deferred.
	held, deferred int
}

// peer is what a watcher knows of one worker instance.
type peer struct {
	worker  string
	timeout time.Duration
	// beat is the number of the last heartbeat heard; count its Held.
	beat  uint64
	count int
	// held are deliveries the instance held as of beat: all of them if
	// complete (the watcher heard a full beat and every beat since), else
	// those it took in the beats the watcher heard since the last one it
	// missed, which it knows as well (they cannot have been let go of
	// unheard), and the others are unknown.
	held     map[wire.DeliveryRef]wire.Delivery
	complete bool
	heard    time.Time // when beat was received, or the watcher's view reset
	// seen is when the instance last gave a sign of life: a beat, or an
	// answer to a probe. Its deliveries stay its own until AckWait after
	// its last progress report, which came about then.
	seen time.Time
	// lagPeak is how late the watcher's echo came at worst since heard,
	// or since a held judgement (hold.go).
	lagPeak time.Duration
	// probed is when the watcher started asking the instance whether it
	// lives, after its silence; zero when no probe is out. A beat heard
	// meanwhile ends the suspicion.
	probed time.Time
	// asked is when the watcher last asked this instance for a full
	// heartbeat.
	asked time.Time
}

// syncEvery spaces a watcher's requests for one instance's full
// heartbeat: the answer comes within the instance's interval.
const syncEvery = time.Second

// Why a watcher no longer knows all of a peer's deliveries.
const (
	setLost     = "missed a heartbeat"
	setMismatch = "the heartbeat's count does not match"
)

// apply brings p's set up to hb, the heartbeat heard after p.beat. It
// returns why the complete set it held is gone, or "" if nothing was
// lost.
func (p *peer) apply(hb wire.Heartbeat) string {
	p.worker, p.timeout = hb.Worker, hb.Timeout()
	defer func() { p.beat, p.count = hb.Beat, hb.Held }()
	lost := ""
	switch {
	case hb.Full:
		p.held = make(map[wire.DeliveryRef]wire.Delivery, len(hb.Deliveries))
		for _, d := range hb.Deliveries {
			p.held[d.Ref()] = d
		}
		p.complete = true
	case hb.Beat == p.beat+1 && p.held != nil:
		for _, r := range hb.Removed {
			delete(p.held, r)
		}
		for _, d := range hb.Added {
			p.held[d.Ref()] = d
		}
	default:
		// The first beat heard, or one after a gap: what the missed beats
		// let go of is unknown, so only what this one took is known.
		if p.complete {
			lost = setLost
		}
		p.forget()
		for _, d := range hb.Added {
			p.held[d.Ref()] = d
		}
	}
	if p.complete && len(p.held) != hb.Held || len(p.held) > hb.Held {
		p.forget()
		return setMismatch
	}
	return lost
}

// forget keeps nothing of p's deliveries: they may have changed unheard.
func (p *peer) forget() {
	p.held, p.complete = map[wire.DeliveryRef]wire.Delivery{}, false
}

func newLivenessWatch(self string, logger *slog.Logger, handOver func(silentPeer, wire.Delivery)) *livenessWatch {
	return &livenessWatch{
		self: self, logger: logger, handOver: handOver,
		ping: func(time.Time) {}, losses: func() uint64 { return 0 }, sync: func(string) {},
		probe: func(context.Context, string) verdict { return verdictGone },
		peers: map[string]*peer{}, queued: make(chan struct{}, 1),
	}
}

// observe records a heartbeat as heard now.
func (lw *livenessWatch) observe(hb wire.Heartbeat) {
	if hb.Instance == lw.self {
		return
	}
	// Asked outside the lock: a publish can wait for the socket.
	if lw.record(hb) {
		lw.sync(hb.Instance)
	}
}

// record applies hb heard now, and reports whether to ask its instance
// for a full heartbeat.
func (lw *livenessWatch) record(hb wire.Heartbeat) (ask bool) {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	lw.heardAgain(hb.Instance)
	if hb.Leaving {
		delete(lw.peers, hb.Instance)
		return false
	}
	p := lw.peers[hb.Instance]
	if p == nil {
		p = &peer{}
		lw.peers[hb.Instance] = p
	}
	expected := p.beat + 1
	now := time.Now()
	p.heard, p.seen, p.probed, p.lagPeak = now, now, time.Time{}, 0
	if lost := p.apply(hb); lost != "" {
		lw.logger.Warn("a worker's earlier deliveries are unknown until its next full heartbeat; were it to fall silent before, AckWait would redeliver them",
			"reason", lost, "silent_worker", hb.Worker, "instance", hb.Instance, "beat", hb.Beat, "expected", expected)
	}
	if !p.complete && now.Sub(p.asked) >= syncEvery {
		p.asked = now
		return true
	}
	return false
}

// forgetSets drops every peer's deliveries, after heartbeats may have
// been lost.
func (lw *livenessWatch) forgetSets() {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	for _, p := range lw.peers {
		p.forget()
	}
}

// echoed records that an echo sent at sent came back now.
func (lw *livenessWatch) echoed(sent time.Time) {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	lw.echoAt = time.Now()
	if sent.After(lw.echoSent) {
		lw.echoSent = sent
	}
}

// run pings itself and checks for silent workers every watchTick until
// ctx ends: it probes each (probe.go), and hands over those the probe
// confirms silent, unless it holds the judgement (hold.go), at a pace
// (pace.go).
func (lw *livenessWatch) run(ctx context.Context) {
	tick := time.NewTicker(watchTick)
	defer tick.Stop()
	lw.mu.Lock()
	now := time.Now()
	lw.echoAt, lw.echoSent = now, now
	lw.mu.Unlock()
	var draining sync.WaitGroup
	defer draining.Wait()
	draining.Go(func() { lw.drain(ctx) })
	// Whatever the workers sent before, the watcher did not hear.
	lw.sync("")
	losses := lw.losses()
	answers := make(chan probeAnswer)
	for {
		lw.ping(time.Now())
		select {
		case <-ctx.Done():
			return
		case a := <-answers:
			if p, ok := lw.judge(a, time.Now()); ok {
				lw.enqueue(p, time.Now())
			}
			continue
		case <-tick.C:
		}
		if n := lw.losses(); n != losses {
			losses = n
			lw.forgetSets()
			lw.sync("")
			lw.logger.Warn("heartbeats may have been lost (reconnect or slow consumer); every worker's earlier deliveries are unknown until its next full heartbeat")
		}
		for _, s := range lw.suspects(time.Now()) {
			go func() {
				pctx, cancel := context.WithTimeout(ctx, s.timeout)
				defer cancel()
				start := time.Now()
				a := probeAnswer{suspect: s, verdict: lw.probe(pctx, s.instance)}
				a.took = time.Since(start)
				select {
				case answers <- a:
				case <-ctx.Done():
				}
			}()
		}
	}
}

// suspect is a worker instance not heard from within its timeout, being
// probed since probed.
type suspect struct {
	instance string
	timeout  time.Duration
	probed   time.Time
}

// probeAnswer is a suspect's verdict, which took took to come.
type probeAnswer struct {
	suspect
	verdict verdict
	took    time.Duration
}

// silentPeer is a worker not heard from within its timeout.
type silentPeer struct {
	worker, instance string
	timeout          time.Duration
	// held are the deliveries the watcher knows it held (see peer),
	// count how many it held, and complete whether held are all.
	held     map[wire.DeliveryRef]wire.Delivery
	count    int
	complete bool
	quiet    time.Duration
	seen     time.Time // see peer
	verdict  verdict
}

// suspects marks the workers not heard from within their declared timeout
// as probed from now, and returns them; one being probed is not returned
// again until its answer is judged. A watcher that did not hear its own
// echo lately suspects no one: it restarts every worker's clock at now
// instead. It also notes how late the echo is in each worker's silence.
func (lw *livenessWatch) suspects(now time.Time) []suspect {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	if lw.deaf(now) {
		return nil
	}
	lag := lw.lag(now)
	var out []suspect
	for instance, p := range lw.peers {
		p.lagPeak = max(p.lagPeak, lag)
		if p.probed.IsZero() && now.Sub(p.heard) > p.timeout {
			p.probed = now
			out = append(out, suspect{instance: instance, timeout: p.timeout, probed: now})
		}
	}
	return out
}

// judge ends a's suspicion: it removes and returns the worker to hand over
// if the probe confirmed its silence and nothing was heard from it since
// the probe started. A worker that answered, or was heard meanwhile, or
// left, or that the watcher could not ask or may not have heard (it went
// deaf), keeps its requests and gets its clock restarted. One whose probe
// timed out while the watcher or the server may be behind keeps them too,
// and is probed again (hold.go). One last seen longer than AckWait ago is
// forgotten: the server has redelivered what it held (pace.go).
func (lw *livenessWatch) judge(a probeAnswer, now time.Time) (silentPeer, bool) {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	lw.noteRoundTrip(a, now)
	p := lw.peers[a.instance]
	if p == nil || !p.probed.Equal(a.probed) {
		return silentPeer{}, false
	}
	if a.verdict == verdictAlive || a.verdict == verdictUnknown || lw.deaf(now) {
		if a.verdict == verdictAlive {
			lw.logger.Info("a worker's heartbeats came late but it answered a probe; its requests stay with it",
				"worker", p.worker, "instance", a.instance, "silent_for", now.Sub(p.heard).Round(time.Millisecond))
		}
		p.heard, p.probed = now, time.Time{}
		if a.verdict == verdictAlive {
			p.seen = now
		}
		return silentPeer{}, false
	}
	if lw.ackWait > 0 && now.Sub(p.seen) >= lw.ackWait {
		// Its judgement was held that long: AckWait moved its requests
		// already, and it no longer counts among the silent.
		delete(lw.peers, a.instance)
		lw.logger.Info("a silent worker was last seen longer than AckWait ago; AckWait has redelivered its requests",
			"silent_worker", p.worker, "instance", a.instance, "seen", now.Sub(p.seen).Round(time.Millisecond), "probe", a.verdict)
		return silentPeer{}, false
	}
	if a.verdict == verdictMute {
		if reason := lw.holdReason(a.instance, p, now); reason != "" {
			lw.hold(a.instance, p, reason, now)
			return silentPeer{}, false
		}
		lw.mutedAt = now
	}
	delete(lw.peers, a.instance)
	return silentPeer{worker: p.worker, instance: a.instance, timeout: p.timeout, held: p.held, count: p.count, complete: p.complete,
		quiet: now.Sub(p.heard), seen: p.seen, verdict: a.verdict}, true
}

// deaf reports whether the watcher's echo has been missing for longer than
// watchDeaf; if so, it restarts every worker's clock at now, since it has
// not heard what they may have sent, and a probe out is void. lw.mu must
// be held.
func (lw *livenessWatch) deaf(now time.Time) bool {
	if now.Sub(lw.echoAt) <= watchDeaf {
		return false
	}
	for _, p := range lw.peers {
		p.heard, p.probed, p.lagPeak = now, time.Time{}, 0
	}
	return true
}
