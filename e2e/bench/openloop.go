package main

import (
	"context"
	"fmt"
	"time"
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
// dev`'s one process. The capacity that sets the loads is measured first,
// in the same run: a closed loop with enough clients that requests wait
// inside the relay (separate processes), upstream paced.
func (b *bench) openLoop(ctx context.Context) ([]figure, error) {
	op := openLoopPlans[b.plan.mode]
	paced := mockSpec{model: "paced50", tokens: op.tokens, interval: op.interval}
	fast := mockSpec{model: "fast", tokens: op.tokens, interval: -1}
	sys, err := b.startSystem(ctx, systemSpec{
		name: "openloop", mocks: []mockSpec{paced, fast}, workers: 2, maxInflight: op.pacedClients/2 + 16,
	})
	if err != nil {
		return nil, err
	}
	defer sys.stop()
	pacedProxy, err := startProxy(ctx, sys.mocks[paced.model].URL)
	if err != nil {
		return nil, err
	}
	defer pacedProxy.stop()
	fastProxy, err := startProxy(ctx, sys.mocks[fast.model].URL)
	if err != nil {
		return nil, err
	}
	defer fastProxy.stop()

	pacedConv := newConversation(paced.model, "open loop", paced.tokens)
	fastConv := newConversation(fast.model, "open loop", fast.tokens)
	streamLen := time.Duration(paced.tokens) * paced.interval
	direct := target{name: "direct", url: chatURL(sys.mocks[paced.model].URL)}
	proxy := target{name: "bare proxy", url: chatURL(pacedProxy.URL), parts: []part{{"proxy", []cpuClock{pacedProxy}}}}
	fastTargets := map[string]string{direct.name: chatURL(sys.mocks[fast.model].URL), proxy.name: chatURL(fastProxy.URL)}

	var runs openLoopRuns
	full := func(t target, into *systemRuns) error {
		if u, ok := fastTargets[t.name]; ok {
			t.url = u
		}
		var err error
		into.full, err = b.capacity(ctx, t, fastConv, op.fullClients, op.fullWarm, op.fullWindow, 0)
		return err
	}
	relay := target{name: "relay", url: chatURL(sys.edge.URL), parts: b.relayParts(sys)}
	for _, s := range []struct {
		t    target
		into *systemRuns
	}{{direct, &runs.direct}, {proxy, &runs.proxy}, {relay, &runs.relay}} {
		if err := full(s.t, s.into); err != nil {
			return nil, err
		}
	}
	if runs.capacity, err = b.capacity(ctx, relay, pacedConv, op.pacedClients, op.pacedWarm, op.pacedWindow, streamLen); err != nil {
		return nil, err
	}
	if runs.capacity.rate == 0 {
		return nil, fmt.Errorf("openloop: the relay completed no stream in its capacity step: %s", runs.capacity.summary())
	}
	runs.loads = openLoopLoads(op, runs.capacity.rate)
	for _, l := range runs.loads {
		for _, s := range []struct {
			t    target
			into *systemRuns
		}{{direct, &runs.direct}, {proxy, &runs.proxy}, {relay, &runs.relay}} {
			r, err := b.openLoad(ctx, s.t, pacedConv, l.sched)
			if err != nil {
				return nil, err
			}
			b.log.printf("  %s, %s: %s; time to first token %s", s.t.name, l.name, r.summary(), formatDist(summarize(ms(r.ttft)), "ms"))
			s.into.loads = append(s.into.loads, r)
		}
	}

	if err := sys.becomeOneProcess(ctx, "openloop-one", op.pacedClients+16); err != nil {
		return nil, err
	}
	one := target{name: "relay, one process", url: chatURL(sys.edge.URL), parts: b.relayParts(sys)}
	if err := full(one, &runs.one); err != nil {
		return nil, err
	}
	for _, l := range runs.loads {
		r, err := b.openLoad(ctx, one, pacedConv, l.sched)
		if err != nil {
			return nil, err
		}
		b.log.printf("  %s, %s: %s; time to first token %s", one.name, l.name, r.summary(), formatDist(summarize(ms(r.ttft)), "ms"))
		runs.one.loads = append(runs.one.loads, r)
	}
	return runs.figures(op), nil
}

// loadSpec is one open-loop load: its schedule, and whether issue 18's
// goal applies to it.
type loadSpec struct {
	name     string
	fraction float64 // of the reference capacity; zero for a burst
	note     string  // a burst's shape
	sched    schedule
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
			fraction: f,
			sched:    poissonArrivals(rate, d, uint64(i+1)),
		})
	}
	return append(out, loadSpec{
		name:  fmt.Sprintf("a burst of %d at once", op.burst),
		note:  fmt.Sprintf("%d burst(s) of %d requests, %v apart", op.bursts, op.burst, op.burstEvery),
		sched: bursts(op.burst, op.bursts, op.burstEvery),
	})
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
	// paced: the loads are fractions of it.
	capacity                  capResult
	loads                     []loadSpec
	direct, proxy, relay, one systemRuns
}
