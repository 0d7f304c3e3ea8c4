package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/relay/fleet/breaker"
	"github.com/relaydev/relay/relay/wire"
)

// breakerModel is the model, and the provider, whose breaker the phase
// opens.
const breakerModel = "breaker"

// breakers measures breaker propagation: how long after the failure that
// opens a provider's breaker every worker refuses that provider. Three
// workers serve a provider whose breaker opens on one failure (the
// propagation does not depend on how many failures trip it). In each round
// the breaker is closed again, the benchmark queues a probe request every
// plan.breakerProbeEvery straight onto the request queue (as an edge
// does; the edge's own front-door check is not what is measured), and
// once every worker has served a probe it queues one request that the
// fake upstream answers with HTTP 500. The worker that gets it counts the
// failure and opens the breaker; the breaker's State.Since, stamped by
// that worker when it counted the failure, is the start. A worker refuses
// a probe by ending its stream failed with status 503 without calling the
// provider; the claim and end frames of every probe, with the times
// JetStream stored them, say which worker took it and what it did. A
// worker's propagation is the time from the start to the end frame of its
// first refusal: an upper bound, late by up to the gap between the probes
// it takes and one publish. The round's figure is its slowest worker.
// Baseline: a KV put until a watcher sees it, on the same server.
func (b *bench) breakers(ctx context.Context) ([]figure, error) {
	base, err := b.kvBaseline(ctx)
	if err != nil {
		return nil, err
	}
	p := b.plan
	sys, err := b.startSystem(ctx, systemSpec{
		name: "breaker", mocks: []mockSpec{{model: breakerModel, tokens: 2, interval: -1}},
		workers: p.breakerWorkers, maxInflight: 16,
		breaker: map[string]any{"failures": 1, "cooldown": "10m", "max_wait": "-1s"},
	})
	if err != nil {
		return nil, err
	}
	defer sys.stop()
	kv, err := b.js.KeyValue(ctx, wire.BreakerBucket)
	if err != nil {
		return nil, err
	}
	scope := wire.ScopeKey(breakerModel, breakerModel)
	watch, err := kv.Watch(ctx, scope, jetstream.UpdatesOnly())
	if err != nil {
		return nil, err
	}
	defer watch.Stop()
	probes := &probeLog{byID: map[string]*probe{}}
	sub, err := b.nc.Subscribe(wire.LiveSubject("*"), probes.record)
	if err != nil {
		return nil, err
	}
	defer sub.Unsubscribe()

	var slowest, each, late []time.Duration
	admittedAfter := 0
	for round := range p.breakerRounds {
		r, err := b.breakerRound(ctx, sys, kv, scope, watch, probes)
		if err != nil {
			return nil, fmt.Errorf("breaker round %d: %w", round+1, err)
		}
		slowest = append(slowest, slices.Max(r.refused))
		each = append(each, r.refused...)
		late = append(late, r.resolution...)
		admittedAfter += r.admittedAfter
		b.log.printf("  breaker round %d: opened by %s; every worker refused after %v (learned between: %s)", round+1, r.by, roundMS(slices.Max(r.refused)), r.detail)
	}
	f := figure{
		rank: rankBreaker,
		Name: "breaker propagation: failure → every worker refuses", Unit: "ms",
		Relay: ptr(summarize(ms(slowest))), Baseline: &base, BaselineName: "KV put → watcher",
		Goal: "≤ 100 ms",
		Note: fmt.Sprintf("%d rounds, %d workers, a probe queued every %v; one value per round: its slowest worker (each worker: %s); "+
			"each is an upper bound, up to %s ms (median) after the worker's last probe still served; probes served after a worker's first refusal: %d",
			p.breakerRounds, p.breakerWorkers, p.breakerProbeEvery, formatDist(summarize(ms(each)), "ms"),
			num(summarize(ms(late)).Median), admittedAfter),
	}
	f.compare()
	f.Verdict = verdict(f.Relay.N > 0 && f.Relay.Max <= 100 && admittedAfter == 0)
	return []figure{f}, nil
}

// breakerResult is one round: per worker, the time from the failure to
// its first refusal, and how long before that its last probe was still
// served (the uncertainty of the figure).
type breakerResult struct {
	by                  string
	refused, resolution []time.Duration
	// admittedAfter counts probes a worker served after it had refused
	// one: a breaker that flapped, or a probe of an earlier round.
	admittedAfter int
	// detail gives each worker's window: from its last probe served to
	// its first refusal, since the failure.
	detail string
}

func roundMS(d time.Duration) time.Duration { return d.Round(100 * time.Microsecond) }

func (b *bench) breakerRound(ctx context.Context, sys *system, kv jetstream.KeyValue, scope string, watch jetstream.KeyWatcher, probes *probeLog) (breakerResult, error) {
	closed, _ := json.Marshal(breaker.State{Phase: breaker.Closed})
	reset := time.Now()
	if _, err := kv.Put(ctx, scope, closed); err != nil {
		return breakerResult{}, err
	}
	probes.reset()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { b.queueProbes(stop, probes) })
	stopped := false
	stopProbes := func() error {
		if stopped {
			return nil
		}
		stopped = true
		close(stop)
		wg.Wait()
		// Every request of the round ends before the next round: a
		// retry of the failing one would open the breaker again.
		return b.awaitProbes(ctx, probes, func() bool { return probes.pending() == 0 })
	}
	defer stopProbes()

	workers := make([]string, len(sys.workers))
	for i, w := range sys.workers {
		workers[i] = w.Name
	}
	// Every worker serves a probe: it sees the breaker closed.
	if err := b.awaitProbes(ctx, probes, func() bool { return probes.allServed(workers, reset) }); err != nil {
		return breakerResult{}, fmt.Errorf("not every worker served a probe after the reset: %w", err)
	}
	trigger := wire.NewStreamID()
	probes.sent(trigger, false)
	if err := b.queueRequest(trigger, "[[mock: status=500, times=0]] open the breaker"); err != nil {
		return breakerResult{}, err
	}
	opened, err := awaitOpen(ctx, watch, reset)
	if err != nil {
		return breakerResult{}, err
	}
	if err := b.awaitProbes(ctx, probes, func() bool { return probes.allRefused(workers) }); err != nil {
		return breakerResult{}, fmt.Errorf("not every worker refused: %w", err)
	}
	if err := stopProbes(); err != nil {
		return breakerResult{}, fmt.Errorf("the round's requests did not end: %w", err)
	}
	res := breakerResult{by: opened.By}
	var detail []string
	for _, w := range workers {
		first, last, after := probes.turn(w)
		res.refused = append(res.refused, first.Sub(opened.Since))
		res.resolution = append(res.resolution, first.Sub(last))
		res.admittedAfter += after
		detail = append(detail, fmt.Sprintf("%s %v–%v", w, roundMS(last.Sub(opened.Since)), roundMS(first.Sub(opened.Since))))
	}
	res.detail = strings.Join(detail, ", ")
	return res, nil
}

// awaitOpen waits, at most 5 s, for the watcher to report the breaker
// opened after since.
func awaitOpen(ctx context.Context, w jetstream.KeyWatcher, since time.Time) (breaker.State, error) {
	timeout := time.NewTimer(5 * time.Second)
	defer timeout.Stop()
	for {
		select {
		case e := <-w.Updates():
			if e == nil || e.Operation() != jetstream.KeyValuePut {
				continue
			}
			var s breaker.State
			if json.Unmarshal(e.Value(), &s) == nil && s.Current() == breaker.Open && s.Since.After(since) {
				return s, nil
			}
		case <-timeout.C:
			return breaker.State{}, fmt.Errorf("the breaker did not open within 5s")
		case <-ctx.Done():
			return breaker.State{}, ctx.Err()
		}
	}
}

// awaitProbes polls cond for at most 10 s.
func (b *bench) awaitProbes(ctx context.Context, probes *probeLog, cond func() bool) error {
	for start := time.Now(); !cond(); {
		if time.Since(start) > 10*time.Second {
			return fmt.Errorf("gave up after 10s: %s", probes.summary())
		}
		if err := sleep(ctx, 2*time.Millisecond); err != nil {
			return err
		}
	}
	return nil
}

// queueProbes queues a probe every plan.breakerProbeEvery until stop.
func (b *bench) queueProbes(stop <-chan struct{}, probes *probeLog) {
	t := time.NewTicker(b.plan.breakerProbeEvery)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		id := wire.NewStreamID()
		probes.sent(id, true)
		if err := b.queueRequest(id, "probe "+id); err != nil {
			b.log.printf("  breaker: queueing a probe: %v", err)
		}
	}
}

// queueRequest puts a request on the workers' queue the way an edge does
// (without the Meta, which a worker only reads for a cancellation).
func (b *bench) queueRequest(id, prompt string) error {
	body, _ := json.Marshal(map[string]any{"model": breakerModel, "stream": true,
		"messages": []map[string]string{{"role": "user", "content": prompt}}})
	data, _ := json.Marshal(wire.Request{StreamID: id, Model: breakerModel, Body: body, Created: time.Now().Unix()})
	msg := &nats.Msg{Subject: wire.RequestSubject, Data: data, Header: nats.Header{}}
	msg.Header.Set(jetstream.MsgIDHeader, id)
	return b.nc.PublishMsg(msg)
}

// probe is what the stored frames of one probe said.
type probe struct {
	probe   bool // false: the request that opens the breaker
	worker  string
	claimed time.Time // claim frame stored
	ended   time.Time // end frame stored; zero while it runs
	refused bool      // ended failed with 503: the provider was not called
	reason  string
}

// probeLog collects the frames of the probes of one round from the live
// subjects, stamped with the time JetStream stored them.
type probeLog struct {
	mu   sync.Mutex
	byID map[string]*probe
}

func (l *probeLog) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	clear(l.byID)
}

// sent notes a request queued: a probe, or the request that fails.
func (l *probeLog) sent(id string, isProbe bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.byID[id] = &probe{probe: isProbe}
}

// record notes a claim or end frame of a probe of this round.
func (l *probeLog) record(m *nats.Msg) {
	id, ok := wire.StreamIDFromLive(m.Subject)
	if !ok {
		return
	}
	f, err := wire.DecodeFrame(m.Data)
	if err != nil {
		return
	}
	at, err := time.Parse(time.RFC3339Nano, m.Header.Get(jetstream.TimeStampHeaer))
	if err != nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	p := l.byID[id]
	if p == nil {
		return
	}
	switch f.Kind {
	case wire.KindClaim:
		if p.worker == "" {
			p.worker, p.claimed = f.Worker, at
		}
	case wire.KindEnd:
		p.ended = at
		p.refused = f.Status == wire.StatusFailed && f.Error != nil && f.Error.Status == 503
		if f.Error != nil {
			p.reason = f.Error.Message
		}
	}
}

func (l *probeLog) pending() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, p := range l.byID {
		if p.ended.IsZero() {
			n++
		}
	}
	return n
}

// allServed reports whether every worker served a probe claimed after
// since.
func (l *probeLog) allServed(workers []string, since time.Time) bool {
	return l.every(workers, func(p *probe) bool { return !p.ended.IsZero() && !p.refused && p.claimed.After(since) })
}

// allRefused reports whether every worker refused a probe.
func (l *probeLog) allRefused(workers []string) bool {
	return l.every(workers, func(p *probe) bool { return p.refused })
}

func (l *probeLog) every(workers []string, ok func(*probe) bool) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	seen := map[string]bool{}
	for _, p := range l.byID {
		if p.probe && ok(p) {
			seen[p.worker] = true
		}
	}
	for _, w := range workers {
		if !seen[w] {
			return false
		}
	}
	return true
}

// turn returns when worker's first refusal was stored, when its last probe
// served before that was claimed (a time at which it had not yet learned),
// and how many probes it served after the first refusal.
func (l *probeLog) turn(worker string) (first, last time.Time, after int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var mine []*probe
	for _, p := range l.byID {
		if p.probe && p.worker == worker && !p.ended.IsZero() {
			mine = append(mine, p)
		}
	}
	for _, p := range mine {
		if p.refused && (first.IsZero() || p.ended.Before(first)) {
			first = p.ended
		}
	}
	for _, p := range mine {
		switch {
		case p.refused:
		case p.claimed.Before(first):
			last = p.claimed
		default:
			after++
		}
	}
	return first, last, after
}

func (l *probeLog) summary() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	counts := map[string]int{}
	for _, p := range l.byID {
		state := "running"
		switch {
		case p.worker == "":
			state = "unclaimed"
		case p.ended.IsZero():
		case p.refused:
			state = "refused"
		default:
			state = "served"
		}
		counts[cmp.Or(p.worker, "-")+" "+state+" "+p.reason]++
	}
	var parts []string
	for k, v := range counts {
		parts = append(parts, fmt.Sprintf("%s %d", k, v))
	}
	sort.Strings(parts)
	return "probes: " + strings.Join(parts, ", ")
}
