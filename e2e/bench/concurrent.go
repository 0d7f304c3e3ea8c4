package main

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/relaydev/relay/e2e/procs"
)

// concurrent opens concStreams SSE streams on one edge twice, each time on
// fresh roles. The first run (plan.conc) sends tokens slowly, so that the
// total chunk rate is well within what the relay delivers: it measures
// concurrency, whether every stream is held open and delivered exactly,
// and the edge's memory per open stream. The second (plan.concFast) sends
// one token per second per stream: at 10,000 streams that total rate is a
// throughput figure, and its note gives the rate the clients received
// against the rate the upstream produced. Baselines: the same processes,
// idle, before the streams.
func (b *bench) concurrent(ctx context.Context) ([]figure, error) {
	p := b.plan
	var figs []figure
	var capacity concResult
	specs := []mockSpec{p.conc, p.concFast}
	if p.concFastOnly {
		specs = specs[1:]
	}
	for i, spec := range specs {
		t0 := time.Now()
		r, err := b.concurrentRun(ctx, p.concStreams, spec)
		if err != nil {
			return nil, err
		}
		r.took = time.Since(t0)
		b.log.printf("  concurrent: %d of %d delivered at %s in %v", r.exact, r.n, tokenRate(spec), r.took.Round(time.Second))
		figs = append(figs, r.deliveredFigure())
		if i == 0 && !p.concFastOnly {
			capacity = r
		}
	}
	if p.concFastOnly {
		return figs, nil
	}
	return append(figs, capacity.memoryFigures()...), nil
}

// tokenRate names a stream's pace: "1 token/5s".
func tokenRate(spec mockSpec) string { return fmt.Sprintf("1 token/%v", spec.interval) }

// concResult is what one run of the concurrent phase measured.
type concResult struct {
	n, maxInflight int
	streamLen      time.Duration
	spec           mockSpec
	workers        int

	exact, opened, most int64
	allOpen             time.Duration // until the last stream opened; 0 if not all did
	took                time.Duration // the whole run, roles started and stopped included
	failures            map[string]int
	example             string
	cpu                 string
	handovers           int

	// tokensPerSec and chunksPerSec are what the clients received while
	// (nearly) all streams were open; 0 without two such samples.
	tokensPerSec, chunksPerSec float64

	idleEdge  float64   // KiB
	perStream []float64 // KiB per open stream, per plateau sample
}

// concurrentRun opens n streams of spec through fresh roles and samples
// memory while they run.
func (b *bench) concurrentRun(ctx context.Context, n int, spec mockSpec) (concResult, error) {
	p := b.plan
	res := concResult{
		n: n, maxInflight: n/p.concWorkers + 100, spec: spec, workers: p.concWorkers,
		streamLen: time.Duration(spec.tokens) * spec.interval,
	}
	sys, err := b.startSystem(ctx, systemSpec{
		name: fmt.Sprintf("conc%d-%v", n, spec.interval), mocks: []mockSpec{spec}, workers: p.concWorkers, maxInflight: res.maxInflight, h2c: p.h2c,
	})
	if err != nil {
		return res, err
	}
	defer sys.stop()
	if err := sleep(ctx, 2*time.Second); err != nil {
		return res, err
	}
	idle, err := sys.rss()
	if err != nil {
		return res, err
	}

	c := &concRun{
		hc:        newHTTPClient(n, true),
		url:       chatURL(sys.edge.URL),
		spec:      spec,
		n:         n,
		ids:       make([]string, n),
		start:     time.Now(),
		failures:  map[string]int{},
		streamLen: res.streamLen,
	}
	defer c.hc.CloseIdleConnections()
	cpu := b.meterCPU(sys)
	// At most concOpening requests wait for their response headers at a
	// time: a ramp the edge can keep up with, instead of 10,000
	// simultaneous dials.
	sem := make(chan struct{}, concOpening)
	var wg sync.WaitGroup
	// Streams are launched from a goroutine of their own, so that memory is
	// sampled during the ramp too.
	rampEnd := time.After(p.concRamp)
	wg.Go(func() {
		for i := range n {
			select {
			case sem <- struct{}{}:
			case <-rampEnd:
				c.mu.Lock()
				c.failures[fmt.Sprintf("not started: the ramp took longer than %v", p.concRamp)] = n - i
				c.mu.Unlock()
				return
			case <-ctx.Done():
				return
			}
			wg.Go(func() { c.stream(ctx, i, sem) })
		}
	})
	samples, err := b.sampleWhile(ctx, sys, c, &wg)
	if err != nil {
		return res, err
	}
	res.cpu = cpu.String()
	res.handovers = handovers(sys.workers)

	// The plateau: samples with (nearly) the most streams open at once.
	for _, s := range samples {
		res.most = max(res.most, s.open)
	}
	plateau := func(s concSample) bool { return res.most > 0 && float64(s.open) >= 0.99*float64(res.most) }
	var tokens, chunks int64
	var span time.Duration
	for i, s := range samples {
		if !plateau(s) {
			continue
		}
		res.perStream = append(res.perStream, float64(s.rss.edge-idle.edge)/float64(s.open)/1024)
		if i > 0 && plateau(samples[i-1]) {
			prev := samples[i-1]
			tokens, chunks, span = tokens+s.tokens-prev.tokens, chunks+s.chunks-prev.chunks, span+s.at.Sub(prev.at)
		}
	}
	if span > 0 {
		res.tokensPerSec, res.chunksPerSec = float64(tokens)/span.Seconds(), float64(chunks)/span.Seconds()
	}
	res.idleEdge = float64(idle.edge) / 1024
	res.exact, res.opened = c.exact.Load(), c.opened.Load()
	res.allOpen = time.Duration(c.allOpen.Load())
	res.failures, res.example = c.failures, c.example
	return res, nil
}

func (r concResult) deliveredFigure() figure {
	rampNote := fmt.Sprintf("%d of %d streams opened", r.opened, r.n)
	if r.allOpen > 0 {
		rampNote = fmt.Sprintf("all opened within %v", r.allOpen.Round(100*time.Millisecond))
	}
	f := figure{
		rank: rankConcurrent,
		Name: fmt.Sprintf("concurrent SSE streams on one edge: %s streams at %s, delivered exactly", num(float64(r.n)), tokenRate(r.spec)),
		Unit: "%", Relay: ptr(summarize([]float64{100 * float64(r.exact) / float64(r.n)})), Goal: "10,000 streams, 100 % delivered",
		Note: fmt.Sprintf("upstream %d tokens at %v/token (%v per stream); %s; at most %d open at once; %d workers × max_inflight %d; %s; CPU %s; %d requests handed over from workers judged silent; the run took %v",
			r.spec.tokens, r.spec.interval, r.streamLen, rampNote, r.most, r.workers, r.maxInflight, r.rateNote(), r.cpu, r.handovers, r.took.Round(time.Second)),
	}
	switch {
	case r.exact < int64(r.n):
		f.Verdict = "missed"
		f.Note += "; failures: " + formatCounts(r.failures) + "; e.g. " + r.example
	case r.n < 10_000:
		f.Verdict = "n/a (fewer streams)"
	default:
		f.Verdict = "met"
	}
	return f
}

// rateNote compares what the clients received while (nearly) all streams
// were open with what the upstream produced for that many streams.
func (r concResult) rateNote() string {
	need := float64(r.most) / r.spec.interval.Seconds()
	if r.tokensPerSec == 0 {
		return fmt.Sprintf("upstream total %s tokens/s with all open; too few samples to measure the rate received", num(need))
	}
	return fmt.Sprintf("while ≥ 99 %% of the peak were open the clients received %s tokens/s in %s chunks/s, of the %s tokens/s the upstream produced (%.0f %%)",
		num(r.tokensPerSec), num(r.chunksPerSec), num(need), 100*r.tokensPerSec/need)
}

func (r concResult) memoryFigures() []figure {
	idleEdge := summarize([]float64{r.idleEdge})
	edge := figure{
		rank: rankConcurrent,
		Name: fmt.Sprintf("edge RSS per open SSE stream (%s streams at %s)", num(float64(r.n)), tokenRate(r.spec)), Unit: "KiB",
		Relay: ptr(summarize(r.perStream)), Baseline: &idleEdge, BaselineName: "idle edge RSS",
		Goal: "≤ 16 KiB",
		Note: fmt.Sprintf("(edge RSS − idle RSS) / open streams, in the %d one-second samples with ≥ 99 %% of the peak (%d) open", len(r.perStream), r.most),
	}
	if len(r.perStream) > 0 && r.most > 0 {
		edge.Verdict = verdict(edge.Relay.Median <= 16)
		edge.Ratio = (edge.Relay.Median*float64(r.most) + r.idleEdge) / r.idleEdge
		edge.Note += "; ratio: edge RSS with the streams open / idle"
	}
	return []figure{edge}
}

// handovers counts the requests workers took over from a worker they
// judged silent, from the workers' logs. On two saturated cores a
// heartbeat can come later than worker.liveness_timeout: the handovers
// that follow, thousands at once, are what breaks delivery at 10,000
// streams, so the note says how many there were.
func handovers(workers []*procs.Process) int {
	n := 0
	for _, w := range workers {
		log, err := w.Log()
		if err != nil {
			continue
		}
		n += strings.Count(log, "handed over a silent worker's request")
	}
	return n
}

// concOpening bounds the streams being opened at once: requests sent whose
// response headers are not in yet. The edge holds a stream's headers until
// its first frame, for up to 2 s (so that a provider's refusal can still be
// its HTTP status), and at 1 token/5 s that is the whole 2 s: 64 at a time
// opened 32 streams a second, 2,880 of 10,000 in the phase's window. 512
// open 10,000 in about 40 s.
const concOpening = 512

// concRun is the client side of the concurrent-streams phase.
type concRun struct {
	hc        *http.Client
	url       string
	spec      mockSpec
	n         int
	streamLen time.Duration
	start     time.Time

	ids                           []string // stream ids, by index
	opened, live, finished, exact atomic.Int64
	// tokens and chunks count what the clients received, content only.
	tokens, chunks atomic.Int64
	allOpen        atomic.Int64 // ns from start until the last stream opened

	mu       sync.Mutex
	failures map[string]int // by kind
	example  string
}

// stream runs stream i; sem is released once its response headers are in.
func (c *concRun) stream(ctx context.Context, i int, sem chan struct{}) {
	release := sync.OnceFunc(func() { <-sem })
	defer release()
	conv := newConversation(c.spec.model, fmt.Sprintf("concurrent %d", i), c.spec.tokens)
	sctx, cancel := context.WithTimeout(ctx, c.streamLen+time.Minute)
	defer cancel()
	seen := false
	toks := newTokenCounter(conv)
	r := runStream(sctx, c.hc, c.url, conv, streamOpts{
		onOpen: func(s *opened) {
			c.ids[i] = s.streamID
			release()
			if c.opened.Add(1) == int64(c.n) {
				c.allOpen.Store(int64(time.Since(c.start)))
			}
		},
		onEvent: func(ev *event, _ time.Time) {
			if ev.Content == "" {
				return
			}
			if !seen {
				seen = true
				c.live.Add(1)
			}
			c.chunks.Add(1)
			c.tokens.Add(int64(toks.add(ev.Content)))
		},
	})
	c.finished.Add(1)
	if r.exact(conv.answer) {
		c.exact.Add(1)
		return
	}
	kind := failureKind(r, conv.answer)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.failures[kind]++
	if c.example == "" {
		c.example = fmt.Sprintf("stream %d (%s): %v (%d of %d bytes)", i, r.StreamID, r.Err, len(r.Text), len(conv.answer))
	}
}

// failureKind classifies a stream that was not delivered exactly, for a
// short count of what went wrong.
func failureKind(r streamResult, want string) string {
	switch {
	case r.Opened.IsZero():
		return "not opened: " + shorten(fmt.Sprint(r.Err))
	case r.Err != nil:
		return "broken: " + shorten(fmt.Sprint(r.Err))
	case r.Text != want:
		return fmt.Sprintf("wrong text (status %q)", r.Status)
	}
	return fmt.Sprintf("ended %q without finish", r.Status)
}

// shorten makes an error a failure kind: stream ids out, at most 100
// bytes.
func shorten(s string) string {
	s = streamIDs.ReplaceAllString(s, "<id>")
	if len(s) > 100 {
		return s[:100] + "…"
	}
	return s
}

// streamIDs matches the ids protocol.NewStreamID makes, and their
// abbreviations in error messages.
var streamIDs = regexp.MustCompile(`\bs[a-z2-7]{26}\b|\bs[a-z2-7]{3,25}…`)

// concSample is the memory of the phase's processes at one moment, how
// many streams were open then, and how many tokens and chunks the clients
// had received by then.
type concSample struct {
	at                   time.Time
	open, tokens, chunks int64
	rss                  rssSet
}

// sampleWhile samples memory every second until wg is done.
func (b *bench) sampleWhile(ctx context.Context, sys *system, c *concRun, wg *sync.WaitGroup) ([]concSample, error) {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var samples []concSample
	for {
		select {
		case <-done:
			return samples, nil
		case <-ctx.Done():
			<-done
			return nil, ctx.Err()
		case <-tick.C:
			rs, err := sys.rss()
			if err != nil {
				b.log.printf("  concurrent: %v", err)
				continue
			}
			o, f := c.opened.Load(), c.finished.Load()
			samples = append(samples, concSample{at: time.Now(), open: o - f, tokens: c.tokens.Load(), chunks: c.chunks.Load(), rss: rs})
			if len(samples)%5 == 0 {
				b.log.printf("  concurrent: %d opened, %d with a chunk, %d finished (%d exact); edge RSS %d MiB",
					o, c.live.Load(), f, c.exact.Load(), rs.edge>>20)
			}
		}
	}
}

// rssSet is the resident memory of the edge and of each worker.
type rssSet struct {
	edge    int64
	workers []int64
}

func (s *system) rss() (rssSet, error) {
	var r rssSet
	var err error
	if r.edge, err = s.edge.RSS(); err != nil {
		return r, err
	}
	for _, w := range s.workers {
		v, err := w.RSS()
		if err != nil {
			return r, err
		}
		r.workers = append(r.workers, v)
	}
	return r, nil
}

// formatCounts renders "a: 1, b: 2" in key order.
func formatCounts(m map[string]int) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s: %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}
