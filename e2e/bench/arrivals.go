package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"
)

// schedule is when each request of an open-loop load arrives, as offsets
// from the load's start. Every system of a load is sent the same
// schedule.
type schedule []time.Duration

// poissonArrivals draws arrivals at rate per second for d: exponential
// gaps, the arrivals of many independent users. The seed makes the
// schedule the same for every system it is replayed against.
func poissonArrivals(rate float64, d time.Duration, seed uint64) schedule {
	rng := rand.New(rand.NewPCG(seed, seed))
	var out schedule
	for t := rng.ExpFloat64() / rate; t < d.Seconds(); t += rng.ExpFloat64() / rate {
		out = append(out, time.Duration(t*float64(time.Second)))
	}
	return out
}

// split cuts sched, which spans d, into n schedules of d/n each, every
// one starting at zero: the rounds of a load, which the systems take in
// turn so that a spell of noise on a shared machine falls on all of them.
func split(sched schedule, d time.Duration, n int) []schedule {
	out := make([]schedule, n)
	seg := d / time.Duration(n)
	for _, off := range sched {
		i := min(int(off/seg), n-1)
		out[i] = append(out[i], off-time.Duration(i)*seg)
	}
	return out
}

// burst is n requests at once.
func burst(n int) schedule { return make(schedule, n) }

// target is one system a load is sent to: its chat completions URL and
// the processes that carry its streams (none for the fake upstream
// called directly).
type target struct {
	name  string
	url   string
	parts []part
}

// openResult is what an open-loop load recorded, summed over its rounds.
type openResult struct {
	// ttft is each exact stream's time from its scheduled arrival to its
	// first content; lag the time from the scheduled arrival until the
	// client sent it (how late the load generator itself was).
	ttft, lag       []time.Duration
	arrivals, exact int
	firstFailure    string
	// open is the streams' time from scheduled arrival to end, summed;
	// elapsed the rounds' time from their start until every stream ended.
	open, elapsed time.Duration
	cost          cpuCost
}

// inFlight is how many streams were open on average (Little's law).
func (r openResult) inFlight() float64 {
	return r.open.Seconds() / max(r.elapsed.Seconds(), 1e-3)
}

func (r openResult) summary() string {
	s := fmt.Sprintf("%d of %d exact, %.0f in flight on average", r.exact, r.arrivals, r.inFlight())
	if r.firstFailure != "" {
		s += ", first failure: " + r.firstFailure
	}
	return s
}

// add sums round o into r.
func (r *openResult) add(o openResult) {
	r.ttft, r.lag = append(r.ttft, o.ttft...), append(r.lag, o.lag...)
	r.arrivals, r.exact = r.arrivals+o.arrivals, r.exact+o.exact
	if r.firstFailure == "" {
		r.firstFailure = o.firstFailure
	}
	r.open, r.elapsed = r.open+o.open, r.elapsed+o.elapsed
	r.cost.add(o.cost)
}

// openLoad sends conv to t at the times sched gives, whatever happened to
// the requests before: a slow system does not slow the arrivals down.
// Each latency is measured from the request's scheduled arrival, not from
// when the client sent it, so that time the load generator itself fell
// behind counts too (no coordinated omission). It returns once every
// stream ended.
func (b *bench) openLoad(ctx context.Context, t target, conv conversation, sched schedule) (openResult, error) {
	hc := newHTTPClient(1024, true)
	defer hc.CloseIdleConnections()
	res := openResult{arrivals: len(sched)}
	meter := meterParts(t.parts)
	var mu sync.Mutex
	var chunks int
	var wg sync.WaitGroup
	start := time.Now().Add(20 * time.Millisecond)
	for _, off := range sched {
		at := start.Add(off)
		if d := time.Until(at); d > 0 && sleep(ctx, d) != nil {
			break
		}
		wg.Go(func() {
			sctx, cancel := context.WithTimeout(ctx, time.Minute)
			r := runStream(sctx, hc, t.url, conv, streamOpts{})
			cancel()
			end := time.Now()
			mu.Lock()
			defer mu.Unlock()
			res.open += end.Sub(at)
			chunks += r.Chunks
			res.lag = append(res.lag, r.Start.Sub(at))
			if !r.exact(conv.answer) {
				if res.firstFailure == "" {
					res.firstFailure = fmt.Sprintf("%v (%d of %d bytes)", r.Err, len(r.Text), len(conv.answer))
				}
				return
			}
			res.exact++
			res.ttft = append(res.ttft, r.First.Sub(at))
		})
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	res.cost = cpuCost{used: meter.used(), chunks: chunks}
	for _, p := range t.parts {
		res.cost.names = append(res.cost.names, p.name)
	}
	return res, ctx.Err()
}
