package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/relaydev/relay/e2e/procs"
)

// workerMemory measures what one in-flight generation costs a worker,
// back to back over the two protocols a worker calls a plain-http
// provider with: HTTP/1.1, one connection per stream in flight, and h2c
// (http2_prior_knowledge), the streams sharing a few connections, as
// they do over TLS with a real provider that speaks HTTP/2. One row each.
func (b *bench) workerMemory(ctx context.Context) ([]figure, error) {
	var out []figure
	for _, h2c := range []bool{false, true} {
		f, err := b.workerMemoryOver(ctx, h2c)
		if err != nil {
			return out, err
		}
		out = append(out, f)
	}
	return out, nil
}

// workerMemoryOver measures, calling the fake upstream over h2c or
// HTTP/1.1, what one in-flight generation costs a worker: one worker
// process (max_inflight a little above the generations) serves
// plan.memGenerations slow streams opened through an edge, and once every
// one of them has delivered its first token (or plan.memRamp has passed),
// the worker's resident memory, Go heap in use and goroutines are sampled.
// Each sample gives (busy − idle) / the streams in flight then (first
// token received, not ended); the baseline is the same worker idle, before
// the streams. On a busy machine a few streams may wait long for their
// first token: they are left out of the count rather than failing the
// phase. Only one worker runs, so every stream is in flight on it, and the
// heap and goroutine counts (from its /metrics) say what the resident
// memory is made of.
func (b *bench) workerMemoryOver(ctx context.Context, h2c bool) (figure, error) {
	p := b.plan
	g := p.memGenerations
	proto, name := "HTTP/1.1", "memory-http1"
	if h2c {
		proto, name = "h2c", "memory-h2c"
	}
	fail := func(err error) (figure, error) { return figure{}, fmt.Errorf("memory over %s: %w", proto, err) }
	ports, err := procs.FreePorts(1)
	if err != nil {
		return fail(err)
	}
	ops := fmt.Sprintf("127.0.0.1:%d", ports[0])
	sys, err := b.startSystem(ctx, systemSpec{
		name: name, mocks: []mockSpec{p.mem}, workers: 1, maxInflight: g + 16, h2c: h2c,
		workerSettings: procs.Settings{"worker.listen": ops}, pprof: b.plan.profileDir != "",
	})
	if err != nil {
		return fail(err)
	}
	defer sys.stop()
	worker := sys.workers[0]
	if err := sleep(ctx, time.Second); err != nil {
		return fail(err)
	}
	idle, err := sampleWorker(ctx, worker, ops, 3, nil)
	if err != nil {
		return fail(err)
	}

	hc := newHTTPClient(g, true)
	defer hc.CloseIdleConnections()
	url := chatURL(sys.edge.URL)
	streamCtx, cancel := context.WithTimeout(ctx, p.memRamp+time.Duration(p.mem.tokens+20)*p.mem.interval)
	defer cancel()
	// started: streams that delivered a token; ended: those of them
	// that ended.
	var started, ended, exact atomic.Int64
	var wg sync.WaitGroup
	sem := make(chan struct{}, concOpening)
	for i := range g {
		conv := newConversation(p.mem.model, fmt.Sprintf("memory %d", i), p.mem.tokens)
		wg.Go(func() {
			counted := false
			// A slot to open a stream is held until its response headers.
			sem <- struct{}{}
			held := true
			release := func() {
				if held {
					<-sem
					held = false
				}
			}
			r := runStream(streamCtx, hc, url, conv, streamOpts{
				onOpen: func(*opened) { release() },
				onEvent: func(ev *event, _ time.Time) {
					if ev.Content != "" && !counted {
						counted = true
						started.Add(1)
					}
				},
			})
			release()
			if counted {
				ended.Add(1)
			}
			if r.exact(conv.answer) {
				exact.Add(1)
			}
		})
	}
	defer wg.Wait()
	rampStart := time.Now()
	for started.Load() < int64(g) && time.Since(rampStart) < p.memRamp {
		if err := sleep(ctx, 20*time.Millisecond); err != nil {
			return fail(err)
		}
	}
	rampDur := time.Since(idle.at)
	inflight := func() int { return int(started.Load() - ended.Load()) }
	busy, err := sampleWorker(ctx, worker, ops, p.memSamples, inflight)
	if err != nil {
		return fail(err)
	}
	if p.profileDir != "" {
		if err := profileMemory(ctx, worker, p.profileDir); err != nil {
			return fail(err)
		}
	}
	wg.Wait()
	lo, hi := g, 0
	for _, s := range busy.all {
		lo, hi = min(lo, s.inflight), max(hi, s.inflight)
	}
	if lo < g/2 {
		return fail(fmt.Errorf("only %d of %d streams in flight while sampling", lo, g))
	}

	per := func(f func(workerSample) float64) []float64 {
		base := f(idle.median)
		out := make([]float64, len(busy.all))
		for i, s := range busy.all {
			out[i] = (f(s) - base) / float64(s.inflight)
		}
		return out
	}
	kib := func(v int64) float64 { return float64(v) / 1024 }
	rss := per(func(s workerSample) float64 { return kib(s.rss) })
	heap := summarize(per(func(s workerSample) float64 { return kib(s.heap) }))
	stacks := summarize(per(func(s workerSample) float64 { return kib(s.stacks) }))
	gor := summarize(per(func(s workerSample) float64 { return float64(s.goroutines) }))
	f := figure{
		rank: rankWorkerMemory,
		Name: "worker memory per in-flight generation, " + proto, Unit: "KiB",
		Relay: ptr(summarize(rss)), Baseline: ptr(summarize([]float64{kib(idle.median.rss)})), BaselineName: "idle worker RSS",
		Goal: "≤ 64 KiB",
		Note: fmt.Sprintf("one worker (max_inflight %d) with %d generations opened (upstream %d tokens at %v/token; %s in flight while sampling, %v after the idle samples; %d of %d streams exact); "+
			"per generation, from %d samples of (busy − idle) / streams in flight: RSS as shown, Go heap in use %s KiB, goroutine stacks %s KiB, goroutines %s (the rest of RSS is the GC's headroom and freed memory not yet returned); idle: RSS %s KiB, heap %s KiB, %d goroutines",
			g+16, g, p.mem.tokens, p.mem.interval, span(lo, hi), rampDur.Round(100*time.Millisecond), exact.Load(), g,
			len(busy.all), num(heap.Median), num(stacks.Median), num(gor.Median),
			num(kib(idle.median.rss)), num(kib(idle.median.heap)), idle.median.goroutines),
	}
	f.Verdict = verdict(f.Relay.N > 0 && f.Relay.Median <= 64)
	return f, nil
}

// workerSample is one reading of a worker's memory.
type workerSample struct {
	rss, heap, stacks int64 // bytes
	goroutines        int
	inflight          int // the benchmark's streams in flight, when sampled
}

type workerSamples struct {
	at     time.Time
	all    []workerSample
	median workerSample
}

// sampleWorker reads the worker's RSS (from /proc) and its Go heap and
// stacks in use and goroutines (from its /metrics) n times, 250 ms apart,
// each with inflight(), if given.
func sampleWorker(ctx context.Context, w *procs.Process, ops string, n int, inflight func() int) (workerSamples, error) {
	out := workerSamples{at: time.Now()}
	var rss, heap, stacks, gor []float64
	for i := range n {
		if i > 0 {
			if err := sleep(ctx, 250*time.Millisecond); err != nil {
				return out, err
			}
		}
		r, err := w.RSS()
		if err != nil {
			return out, err
		}
		m, err := scrape(ctx, "http://"+ops+"/metrics", "go_memstats_heap_inuse_bytes", "go_memstats_stack_inuse_bytes", "go_goroutines")
		if err != nil {
			return out, err
		}
		s := workerSample{rss: r, heap: int64(m[0]), stacks: int64(m[1]), goroutines: int(m[2])}
		if inflight != nil {
			s.inflight = inflight()
		}
		out.all = append(out.all, s)
		rss, heap, stacks, gor = append(rss, float64(s.rss)), append(heap, float64(s.heap)), append(stacks, float64(s.stacks)), append(gor, float64(s.goroutines))
	}
	med := func(xs []float64) int64 { return int64(summarize(xs).Median) }
	out.median = workerSample{rss: med(rss), heap: med(heap), stacks: med(stacks), goroutines: int(med(gor))}
	return out, nil
}

// scrape reads the values of unlabelled metrics from a Prometheus text
// endpoint, in the order asked.
func scrape(ctx context.Context, url string, names ...string) ([]float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	want := map[string]int{}
	for i, n := range names {
		want[n] = i
	}
	out := make([]float64, len(names))
	found := 0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		i, wanted := want[name]
		if !ok || !wanted {
			continue
		}
		if out[i], err = strconv.ParseFloat(strings.TrimSpace(value), 64); err != nil {
			return nil, fmt.Errorf("scrape %s: %s: %w", url, name, err)
		}
		found++
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if found != len(names) {
		return nil, fmt.Errorf("scrape %s: found %d of %v", url, found, names)
	}
	return out, nil
}

// span says "n" or "lo–hi".
func span(lo, hi int) string {
	if lo == hi {
		return strconv.Itoa(lo)
	}
	return fmt.Sprintf("%d–%d", lo, hi)
}
