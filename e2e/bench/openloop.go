package main

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/relaydev/relay/e2e/procs"
)

// openLoop measures what arrivals cost when nobody waits for anybody:
// requests arrive on a schedule (Poisson at fractions of the relay's
// capacity, then bursts of many at once) whatever happened to the ones
// before, and each time to first token counts from the request's
// scheduled arrival. The closed loop of the latency phase cannot show
// this: there a slow answer delays the next request, so queueing hides
// itself.
//
// Every load goes to four systems with the same schedule: the fake
// upstream called directly, a bare reverse proxy in front of it (the
// floor every figure is compared with: what any hop in front of the
// upstream costs), and the relay as separate processes and as `relay
// dev`'s one process. All four run side by side and take each load in
// rounds, in turn, so that a spell of noise on a shared machine does not
// fall on one of them only. The capacity that sets the loads is measured
// first, in the same run: a closed loop with enough clients that
// requests wait inside the relay (separate processes), upstream paced.
func (b *bench) openLoop(ctx context.Context) ([]figure, error) {
	op := openLoopPlans[b.plan.mode]
	if b.plan.openLoopTokens > 0 {
		op.tokens = b.plan.openLoopTokens
	}
	paced := mockSpec{model: "paced50", tokens: op.tokens, interval: op.interval}
	fast := mockSpec{model: "fast", tokens: op.tokens, interval: -1}
	sys, err := b.startSystem(ctx, systemSpec{
		name: "openloop", mocks: []mockSpec{paced, fast}, workers: 2, maxInflight: op.pacedClients/2 + 16, h2c: b.plan.h2c,
		pprof: b.plan.profileDir != "",
	})
	if err != nil {
		return nil, err
	}
	defer sys.stop()
	dev, err := b.h.Start(ctx, procs.Role{
		Role: procs.Dev, Name: "openloop-one", Providers: sys.providers,
		// As in the latency phase: a plain relay, not the demo's edge.
		Settings: procs.Settings{"edge.demo": false, "worker.max_inflight": op.pacedClients + 16},
	})
	if err != nil {
		return nil, err
	}
	defer stopAll([]*procs.Process{dev})
	pacedProxy, err := startProxy(ctx, sys.mocks[paced.model].URL, b.plan.h2c)
	if err != nil {
		return nil, err
	}
	defer pacedProxy.stop()
	fastProxy, err := startProxy(ctx, sys.mocks[fast.model].URL, b.plan.h2c)
	if err != nil {
		return nil, err
	}
	defer fastProxy.stop()

	pacedConv := newConversation(paced.model, "open loop", paced.tokens)
	fastConv := newConversation(fast.model, "open loop", fast.tokens)
	var runs openLoopRuns
	systems := []struct {
		t    target
		fast string // its URL for the full-speed model
		into *systemRuns
	}{
		{target{name: "direct", url: chatURL(sys.mocks[paced.model].URL)}, chatURL(sys.mocks[fast.model].URL), &runs.direct},
		{target{name: "bare proxy", url: chatURL(pacedProxy.URL), parts: []part{{"proxy", []cpuClock{pacedProxy}}}}, chatURL(fastProxy.URL), &runs.proxy},
		{target{name: "relay", url: chatURL(sys.edge.URL), parts: b.relayParts(sys)}, chatURL(sys.edge.URL), &runs.relay},
		{target{name: "relay, one process", url: chatURL(dev.URL), parts: []part{{"relay", []cpuClock{dev}}}}, chatURL(dev.URL), &runs.one},
	}
	for _, s := range systems {
		t := s.t
		t.url = s.fast
		if s.into.full, err = b.capacity(ctx, t, fastConv, op.fullClients, op.fullWarm, op.fullWindow, 0); err != nil {
			return nil, err
		}
	}
	relay := systems[2].t
	streamLen := time.Duration(paced.tokens) * paced.interval
	if runs.capacity, err = b.capacity(ctx, relay, pacedConv, op.pacedClients, op.pacedWarm, op.pacedWindow, streamLen); err != nil {
		return nil, err
	}
	if runs.capacity.rate == 0 {
		return nil, fmt.Errorf("openloop: the relay completed no stream in its capacity step: %s", runs.capacity.summary())
	}
	if runs.round, err = b.storeRound(ctx); err != nil {
		return nil, err
	}
	runs.given = b.plan.openLoopCapacity
	runs.loads = openLoopLoads(op, cmp.Or(runs.given, runs.capacity.rate))
	for _, s := range systems {
		s.into.loads = make([]openResult, len(runs.loads))
	}
	for li, l := range runs.loads {
		for ri, sched := range l.rounds {
			for k := range systems {
				s := systems[(k+ri)%len(systems)] // each round in another order
				var profiled func() error
				if b.plan.profileDir != "" && li == 0 && s.into == &runs.relay {
					ps := append([]*procs.Process{sys.edge}, sys.workers...)
					profiled = profileCPU(ctx, ps, l.span/time.Duration(len(l.rounds)), b.plan.profileDir, fmt.Sprintf("-round%d", ri+1))
				}
				r, err := b.openLoad(ctx, s.t, pacedConv, sched)
				if err != nil {
					return nil, err
				}
				if profiled != nil {
					if err := profiled(); err != nil {
						return nil, err
					}
				}
				s.into.loads[li].add(r)
			}
		}
		for _, s := range systems {
			r := s.into.loads[li]
			b.log.printf("  %s, %s: %s; time to first token %s", s.t.name, l.name, r.summary(), formatDist(summarize(ms(r.ttft)), "ms"))
		}
	}
	return runs.figures(op), nil
}

// loadSpec is one open-loop load, in rounds.
type loadSpec struct {
	name     string
	fraction float64 // of the reference capacity; zero for a burst
	rate     float64 // arrivals per second; zero for a burst
	span     time.Duration
	rounds   []schedule
}

// openLoopLoads are Poisson arrivals at each of the plan's fractions of
// capacity (requests per second), then the bursts.
func openLoopLoads(op openLoopPlan, capacity float64) []loadSpec {
	var out []loadSpec
	for i, f := range op.loads {
		rate := f * capacity
		// Long enough for minArrivals, within twice the plan's duration.
		d := max(op.openDuration, min(2*op.openDuration, time.Duration(float64(op.minArrivals)/rate*float64(time.Second))))
		out = append(out, loadSpec{
			name:     fmt.Sprintf("Poisson arrivals at %.0f %% of capacity", 100*f),
			fraction: f, rate: rate, span: d,
			rounds: split(poissonArrivals(rate, d, uint64(i+1)), d, op.rounds),
		})
	}
	bl := loadSpec{name: fmt.Sprintf("a burst of %d at once", op.burst)}
	for range op.bursts {
		bl.rounds = append(bl.rounds, burst(op.burst))
	}
	return append(out, bl)
}

// systemRuns is what one system measured: its capacity with the upstream
// at full speed, and each load.
type systemRuns struct {
	full  capResult
	loads []openResult
}

// openLoopRuns is the whole phase's measurements.
type openLoopRuns struct {
	// capacity is the relay's (separate processes) with the upstream
	// paced: the loads are fractions of it, unless given is set
	// (--capacity).
	capacity                  capResult
	given                     float64
	loads                     []loadSpec
	direct, proxy, relay, one systemRuns
	// round is the round trip of a message stored alone (ms).
	round dist
}
