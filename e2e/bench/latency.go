package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// latency measures time to first token and the gaps between chunks, at
// each concurrency of the plan, against the fake upstream called directly
// with the same request and concurrency, through the relay in both of its
// layouts: every role a process of its own (as in a cluster), and `relay
// dev`'s one process (embedded NATS, edge, worker and coordinator), the
// single-machine mode, where the hops between the roles stay inside one
// process.
func (b *bench) latency(ctx context.Context) ([]figure, error) {
	p := b.plan
	conv := newConversation(p.paced.model, "time to first token", p.paced.tokens)
	var ttfts, gaps []figure
	for _, l := range p.levels {
		res, err := b.latencyLevel(ctx, conv, l)
		if err != nil {
			return nil, err
		}
		for _, layout := range []struct {
			name string
			r    loadResult
		}{{"", res.relay}, {", one process", res.one}} {
			tf, gf := latencyFigures(p, l, layout.name, res.direct, layout.r)
			ttfts, gaps = append(ttfts, tf), append(gaps, gf)
		}
	}
	return append(ttfts, gaps...), nil
}

// latencyFigures are one layout's time to first token and inter-chunk
// gap at level l.
func latencyFigures(p plan, l level, layout string, d, r loadResult) (tf, gf figure) {
	tf = figure{
		rank: rankTTFT,
		Name: fmt.Sprintf("time to first token, %d concurrent%s", l.streams, layout), Unit: "ms",
		Relay: ptr(summarize(ms(r.ttft))), Baseline: ptr(summarize(ms(d.ttft))), BaselineName: "direct",
		Note: fmt.Sprintf("relay %s; direct %s", r.summary(), d.summary()),
	}
	if r.breakdown != "" {
		tf.Note += "; relay " + r.breakdown
	}
	tf.compare()
	gf = figure{
		rank:  rankGap,
		Name:  fmt.Sprintf("inter-chunk gap, %d concurrent%s (upstream %v/token)", l.streams, layout, p.paced.interval),
		Unit:  "ms",
		Relay: ptr(summarize(ms(r.gaps))), Baseline: ptr(summarize(ms(d.gaps))), BaselineName: "direct",
	}
	gf.compare()
	if l.streams == 100 && layout == "" {
		gf.Goal = "≤ +10 ms median, ≤ +30 ms p99"
		gf.Verdict = verdict(gf.Added != nil && gf.Added.Median <= 10 && gf.Added.P99 <= 30)
	}
	return tf, gf
}

// levelResult is one level's loads: direct, through the relay's separate
// processes, and through its one process.
type levelResult struct {
	direct, relay, one loadResult
}

// latencyLevel runs one level against the fake upstream directly, through
// the relay's separate processes, and through `relay dev` as one process.
// Each level gets its own workers, with as many slots as it has streams:
// every idle slot holds a pull request, which costs the server, so a fleet
// sized for the largest level would tax the smaller.
func (b *bench) latencyLevel(ctx context.Context, conv conversation, l level) (res levelResult, err error) {
	name := fmt.Sprintf("latency%d", l.streams)
	sys, err := b.startSystem(ctx, systemSpec{
		name: name, mocks: []mockSpec{b.plan.paced}, workers: 2, maxInflight: l.streams/2 + 16,
	})
	if err != nil {
		return res, err
	}
	defer sys.stop()
	if res.direct, err = b.load(ctx, sys, "direct", chatURL(sys.mocks[conv.model].URL), conv, l); err != nil {
		return res, err
	}
	if res.relay, err = b.load(ctx, sys, "relay", chatURL(sys.edge.URL), conv, l); err != nil {
		return res, err
	}
	res.relay.breakdown = ttftBreakdown(ctx, b.js, res.relay.timed)
	if err := sys.becomeOneProcess(ctx, name+"-one", l.streams+16); err != nil {
		return res, err
	}
	if res.one, err = b.load(ctx, sys, "relay, one process", chatURL(sys.edge.URL), conv, l); err != nil {
		return res, err
	}
	nc, err := nats.Connect(sys.edge.NATS, nats.Name("relay-bench"))
	if err != nil {
		return res, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return res, err
	}
	res.one.breakdown = ttftBreakdown(ctx, js, res.one.timed)
	return res, nil
}

func ptr[T any](v T) *T { return &v }

// loadResult is what a closed-loop load recorded.
type loadResult struct {
	ttft, gaps     []time.Duration
	streams, exact int
	ramped         int // streams started after the ramp, whose figures count
	failed         int
	firstFailure   string
	rampDur        time.Duration
	cpu            string // cores used while it ran
	// timed are the measured streams with a stream id (relay only), and
	// breakdown their time to first token split into stages.
	timed     []timedStream
	breakdown string
}

func (r loadResult) summary() string {
	s := fmt.Sprintf("%d streams (%d exact, %d measured after a %v ramp)", r.streams, r.exact, r.ramped, r.rampDur.Round(time.Millisecond))
	if r.failed > 0 {
		s += fmt.Sprintf(", %d failed: %s", r.failed, r.firstFailure)
	}
	return s + ", CPU " + r.cpu
}

// load runs l.streams clients, each streaming conv back to back for
// l.duration. Clients start spread over one stream's length, so the load
// is steady rather than a burst, and only streams started after that ramp
// are counted.
func (b *bench) load(ctx context.Context, sys *system, target, url string, conv conversation, l level) (loadResult, error) {
	streamLen := time.Duration(b.plan.paced.tokens) * b.plan.paced.interval
	ramp := time.Duration(0)
	if l.streams > 1 {
		ramp = streamLen
	}
	start := time.Now()
	cpu := b.meterCPU(sys)
	rampEnd, deadline := start.Add(ramp), start.Add(ramp+l.duration)
	hc := newHTTPClient(l.streams, true)
	defer hc.CloseIdleConnections()

	var mu sync.Mutex
	var res loadResult
	var running atomic.Int64
	stop := b.log.every(ctx, 5*time.Second, func() string {
		mu.Lock()
		defer mu.Unlock()
		return fmt.Sprintf("%s, %d concurrent: %d streams, %d failed, %d open", target, l.streams, res.streams, res.failed, running.Load())
	})
	var wg sync.WaitGroup
	for i := range l.streams {
		wg.Go(func() {
			if sleep(ctx, ramp*time.Duration(i)/time.Duration(l.streams)) != nil {
				return
			}
			for time.Now().Before(deadline) && ctx.Err() == nil {
				running.Add(1)
				sctx, cancel := context.WithTimeout(ctx, time.Minute)
				r := runStream(sctx, hc, url, conv, streamOpts{gaps: true})
				cancel()
				running.Add(-1)
				mu.Lock()
				res.streams++
				if r.exact(conv.answer) {
					res.exact++
				} else {
					res.failed++
					if res.firstFailure == "" {
						res.firstFailure = fmt.Sprintf("%v (%d of %d bytes)", r.Err, len(r.Text), len(conv.answer))
					}
				}
				if !r.Start.Before(rampEnd) && r.Chunks > 0 {
					res.ramped++
					res.ttft = append(res.ttft, r.TTFT())
					res.gaps = append(res.gaps, r.Gaps...)
					if r.StreamID != "" {
						res.timed = append(res.timed, timedStream{id: r.StreamID, start: r.Start, opened: r.Opened, first: r.First})
					}
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	stop()
	res.rampDur, res.cpu = ramp, cpu.String()
	b.log.printf("  %s, %d concurrent: %s", target, l.streams, res.summary())
	return res, ctx.Err()
}
