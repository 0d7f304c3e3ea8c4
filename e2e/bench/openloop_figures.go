package main

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// rankOpenLoop puts the open-loop figures after every other: they compare
// with the bare proxy, where the rows above compare with direct calls.
const rankOpenLoop = rankWorkerMemory + 1

// goalLoad is the load, as a fraction of capacity, at which the time to
// first token's and the CPU's goals are set.
const goalLoad = 0.5

// longAnswer is the answer length from which the CPU goals are those of
// long answers (80 tokens), whose requests' own writes weigh less per
// chunk.
const longAnswer = 80

// layout is one of the relay's two layouts in the open-loop figures.
type layout struct {
	suffix string
	runs   systemRuns
}

// figures are the phase's rows: for each load and layout the time to
// first token the relay adds over direct calls against what the bare
// proxy adds; the CPU per delivered chunk at the lower load; and the
// capacity at full speed, against the proxy's.
func (r openLoopRuns) figures(op openLoopPlan) []figure {
	layouts := []layout{{"", r.relay}, {", one process", r.one}}
	pace := fmt.Sprintf("upstream %.0f tok/s", float64(time.Second)/float64(op.interval))
	if op.tokens != openLoopPlans["default"].tokens {
		pace += fmt.Sprintf(", %d-token answers", op.tokens)
	}
	var ttft, cpu, capa []figure
	for i, l := range r.loads {
		for _, lay := range layouts {
			ttft = append(ttft, r.ttftFigure(i, l, lay, pace))
		}
	}
	for _, lay := range layouts {
		cpu = append(cpu, r.cpuFigure(lay, pace, op.tokens))
		capa = append(capa, r.capacityFigure(op, lay))
	}
	cpu = append(cpu, r.natsCPUFigure(pace, op.tokens))
	return append(append(append(ttft, r.roundFigure()), cpu...), capa...)
}

// roundFigure is the round trip of one message stored alone, which the
// time to first token's goal allows twice.
func (r openLoopRuns) roundFigure() figure {
	return figure{
		rank: rankOpenLoop, Unit: "ms",
		Name:  "round trip of one stored message (a publish waiting for its ack, one at a time)",
		Relay: ptr(r.round), Goal: "report",
		Note: fmt.Sprintf("%d messages of 114 bytes, one at a time, into a scratch stream with the relay's replica count, before the loads", r.round.N),
	}
}

// ttftFigure is the time to first token the relay adds over the direct
// calls under load i, next to what the bare proxy adds. Each added value
// is a difference of quantiles (the relay's median minus direct's median,
// its p99 minus direct's p99), so the ratio column is the relay's added
// median over the proxy's.
func (r openLoopRuns) ttftFigure(i int, l loadSpec, lay layout, pace string) figure {
	d, p, rl := summarize(ms(r.direct.loads[i].ttft)), summarize(ms(r.proxy.loads[i].ttft)), summarize(ms(lay.runs.loads[i].ttft))
	f := figure{
		rank: rankOpenLoop, Unit: "ms",
		Name:     fmt.Sprintf("time to first token added over direct, %s (%s)%s", l.name, pace, lay.suffix),
		Relay:    ptr(quantileDiff(rl, d)),
		Baseline: ptr(quantileDiff(p, d)), BaselineName: "bare proxy over direct",
	}
	f.compare()
	if f.Baseline.Median <= 0 {
		f.Ratio = 0 // no floor to divide by
	}
	p99 := ""
	if f.Baseline.P99 > 0 {
		p99 = fmt.Sprintf("; p99 ratio %.2f×", f.Relay.P99/f.Baseline.P99)
	}
	if (l.fraction == goalLoad || l.fraction == 0) && lay.suffix == "" && r.round.N > 0 {
		f.Goal = fmt.Sprintf("≤ the proxy's added + 2 rounds (%s · p99 %s ms)", num(2*r.round.Median), num(2*r.round.P99))
		f.Verdict = verdict(f.Relay.N > 0 && f.Relay.Median <= f.Baseline.Median+2*r.round.Median && f.Relay.P99 <= f.Baseline.P99+2*r.round.P99)
	}
	run := lay.runs.loads[i]
	lag := summarize(ms(slices.Concat(r.direct.loads[i].lag, r.proxy.loads[i].lag, run.lag)))
	f.Note = fmt.Sprintf("%s; time to first token from the scheduled arrival: direct %s, bare proxy %s, relay %s%s; relay %s, bare proxy %s, direct %s; the load generator sent requests %s ms late (median · p99 over all three)",
		r.loadNote(l, run), formatDist(d, "ms"), formatDist(p, "ms"), formatDist(rl, "ms"), p99,
		run.summary(), r.proxy.loads[i].summary(), r.direct.loads[i].summary(), num(lag.Median)+" · "+num(lag.P99))
	return f
}

// loadNote says what load l was.
func (r openLoopRuns) loadNote(l loadSpec, run openResult) string {
	if l.fraction == 0 {
		return fmt.Sprintf("%d requests in %d burst(s), each system in turn", run.arrivals, len(l.rounds))
	}
	of := "the relay's capacity (separate processes, upstream paced), "
	if r.given > 0 {
		of = fmt.Sprintf("%.0f req/s, given with --capacity; the relay's capacity (separate processes, upstream paced) measured ", r.given)
	}
	return fmt.Sprintf("%d arrivals at %.0f req/s for %v in %d round(s), each system in turn: %.0f %% of %s%s",
		run.arrivals, l.rate, l.span.Round(100*time.Millisecond), len(l.rounds), 100*l.fraction, of, r.capacity.summary())
}

// cpuFigure is the processor time of the relay's processes per delivered
// chunk under the first (lowest) Poisson load, next to the bare proxy's
// per delivered event. The notes give both at every load.
func (r openLoopRuns) cpuFigure(lay layout, pace string, tokens int) figure {
	relay, proxy := lay.runs.loads[0].cost, r.proxy.loads[0].cost
	goal := 3.5
	switch {
	case lay.suffix != "":
		goal = 2
	case tokens >= longAnswer:
		goal = 2.5
	}
	f := figure{
		rank: rankOpenLoop, Unit: "µs",
		Name:     fmt.Sprintf("CPU per delivered chunk, %s (%s)%s", r.loads[0].name, pace, lay.suffix),
		Relay:    &dist{N: 1, Median: relay.perChunk()},
		Baseline: &dist{N: 1, Median: proxy.perChunk()}, BaselineName: "bare proxy, per event",
		Goal: fmt.Sprintf("≤ %g× the proxy's", goal),
	}
	f.compare()
	f.Verdict = verdict(relay.chunks > 0 && proxy.chunks > 0 && f.Ratio <= goal)
	var at []string
	for i, l := range r.loads {
		at = append(at, fmt.Sprintf("%s: relay %s; bare proxy %s", l.name, lay.runs.loads[i].cost, r.proxy.loads[i].cost))
	}
	f.Note = "content events the clients received, against the processor time of the processes that carried them (not the fake upstream's nor the clients'); " + strings.Join(at, "; ")
	return f
}

// natsCPUFigure is the nats-servers' share of cpuFigure for the relay's
// separate processes: what storing and carrying a chunk costs them.
func (r openLoopRuns) natsCPUFigure(pace string, tokens int) figure {
	c := r.relay.loads[0].cost
	goal := 150.0
	if tokens >= longAnswer {
		goal = 100
	}
	return figure{
		rank: rankOpenLoop, Unit: "µs",
		Name:  fmt.Sprintf("nats-server CPU per delivered chunk, %s (%s)", r.loads[0].name, pace),
		Relay: &dist{N: 1, Median: c.partPerChunk("nats")},
		Goal:  fmt.Sprintf("≤ %g µs", goal), Verdict: verdict(c.chunks > 0 && c.partPerChunk("nats") <= goal),
		Note: "every nats-server's processor time, summed, over the chunks the clients received",
	}
}

// capacityFigure is the request rate the relay sustains with the
// upstream at full speed, against the bare proxy's.
func (r openLoopRuns) capacityFigure(op openLoopPlan, lay layout) figure {
	f := figure{
		rank: rankOpenLoop, Unit: "req/s",
		Name:     fmt.Sprintf("capacity, upstream at full speed (%d clients back to back, %d tokens)%s", op.fullClients, op.tokens, lay.suffix),
		Relay:    &dist{N: 1, Median: lay.runs.full.rate},
		Baseline: &dist{N: 1, Median: r.proxy.full.rate}, BaselineName: "bare proxy",
		RatioPct: true, Goal: "≥ 50 % of the proxy's",
	}
	if f.Baseline.Median > 0 {
		f.Ratio = f.Relay.Median / f.Baseline.Median
	}
	f.Verdict = verdict(f.Ratio >= 0.5)
	f.Note = fmt.Sprintf("relay %s; bare proxy %s; direct %s",
		lay.runs.full.summary(), r.proxy.full.summary(), r.direct.full.summary())
	return f
}

// quantileDiff is a minus b quantile by quantile, with a's sample count.
func quantileDiff(a, b dist) dist {
	if a.N == 0 || b.N == 0 {
		return dist{}
	}
	return dist{N: a.N, Median: a.Median - b.Median, P99: a.P99 - b.P99, Min: a.Min - b.Min, Max: a.Max - b.Max}
}
