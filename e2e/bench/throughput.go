package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/relay/wire"
)

// throughput measures end-to-end delivered chunks/s and tokens/s, first
// with the fake upstream at full speed, then paced so that tokens arrive
// one by one, and then the ceiling: JetStream async publish of messages of
// the size of the stored chunk frames, on the same server.
//
// At full speed the worker receives an answer faster than it can publish
// one chunk, and coalesces it into a few large chunks (one publish in
// flight per stream), so that run shows the token rate; the paced run shows
// the rate of the chunk path itself.
func (b *bench) throughput(ctx context.Context) ([]figure, error) {
	p := b.plan
	fast := mockSpec{model: "fast", tokens: p.tputTokens, interval: -1}
	sys, err := b.startSystem(ctx, systemSpec{
		name: "tput", mocks: []mockSpec{fast, p.tputPaced}, workers: 2, maxInflight: p.tputStreams,
	})
	if err != nil {
		return nil, err
	}
	defer sys.stop()
	chunkStream, err := b.js.Stream(ctx, wire.ChunkStream)
	if err != nil {
		return nil, err
	}
	first := lastSeq(ctx, chunkStream) + 1
	url := chatURL(sys.edge.URL)
	full, err := b.tputLoad(ctx, sys, "full speed", url, newConversation(fast.model, "throughput", fast.tokens))
	if err != nil {
		return nil, err
	}
	frameBytes, err := meanChunkBytes(ctx, chunkStream, first, lastSeq(ctx, chunkStream))
	if err != nil {
		return nil, err
	}
	b.log.printf("  throughput at full speed: %s", full.summary())
	first = lastSeq(ctx, chunkStream) + 1
	paced, err := b.tputLoad(ctx, sys, "paced", url, newConversation(p.tputPaced.model, "throughput", p.tputPaced.tokens))
	if err != nil {
		return nil, err
	}
	pacedBytes, err := meanChunkBytes(ctx, chunkStream, first, lastSeq(ctx, chunkStream))
	if err != nil {
		return nil, err
	}
	b.log.printf("  throughput paced: %s", paced.summary())
	sys.stop()

	b.log.printf("  ceiling: async publish of %d-byte and %d-byte messages", frameBytes, pacedBytes)
	ceiling, err := b.ceiling(ctx, frameBytes)
	if err != nil {
		return nil, err
	}
	pacedCeiling, err := b.ceiling(ctx, pacedBytes)
	if err != nil {
		return nil, err
	}
	base := "ceiling (JetStream async publish)"
	perChunk := summarize(full.tokenRates).Median / max(summarize(full.chunkRates).Median, 1)
	full.note = fmt.Sprintf("%d concurrent streams of %d tokens; %s; ceiling: one client, async publish of %d-byte messages (the mean stored chunk frame) to 64 subjects, without the worker's expected-last-subject-sequence header. "+
		"The worker keeps one publish in flight per stream and coalesces the tokens that arrive meanwhile into the next chunk, so at full speed a chunk carries %.0f tokens: chunks/s is low by design, and tokens/s is the rate to compare",
		p.tputStreams, p.tputTokens, full.summary(), frameBytes, perChunk)
	paced.note = fmt.Sprintf("%d concurrent streams of %d tokens at %v/token; %s; ceiling with %d-byte messages",
		p.tputStreams, p.tputPaced.tokens, p.tputPaced.interval, paced.summary(), pacedBytes)
	figs := []figure{
		{rank: rankThroughput, Name: fmt.Sprintf("delivered chunks/s, upstream at full speed (coalesced: %.0f tokens per chunk)", perChunk), Unit: "/s",
			Relay: ptr(summarize(full.chunkRates)), Baseline: &ceiling, BaselineName: base, RatioPct: true, Goal: "≥ 50 % of the ceiling", Note: full.note},
		{rank: rankThroughput, Name: "delivered tokens/s, upstream at full speed", Unit: "/s", Relay: ptr(summarize(full.tokenRates)),
			Baseline: &pacedCeiling, BaselineName: fmt.Sprintf("%s of one %d-byte message per token", base, pacedBytes), RatioPct: true, Goal: "report",
			Note: "against what JetStream stores if every token were a message of its own, as large as the paced run's one-token frames"},
		{rank: rankThroughput, Name: "delivered content bytes/s, upstream at full speed", Unit: "MB/s", Relay: ptr(summarize(full.byteRates).scaled(1e-6)),
			Baseline: ptr(ceiling.scaled(float64(frameBytes) / 1e6)), BaselineName: base + " (payload bytes)", RatioPct: true, Goal: "report",
			Note: fmt.Sprintf("the answers' text as the clients received it, against the ceiling's payload (%d-byte messages); the relay's stored frames are larger than their text (JSON envelope)", frameBytes)},
		{rank: rankThroughput, Name: fmt.Sprintf("delivered chunks/s, upstream paced (%v/token)", p.tputPaced.interval), Unit: "/s",
			Relay: ptr(summarize(paced.chunkRates)), Baseline: &pacedCeiling, BaselineName: base, RatioPct: true,
			Goal: "≥ 50 % of the ceiling", Note: paced.note},
	}
	for i := range figs {
		f := &figs[i]
		if f.Baseline.Median > 0 {
			f.Ratio = f.Relay.Median / f.Baseline.Median
		}
		if f.Goal != "report" {
			f.Verdict = verdict(f.Ratio >= 0.5)
		}
	}
	return figs, nil
}

// tputResult is what one throughput load delivered.
type tputResult struct {
	// chunkRates, tokenRates and byteRates (of content) are per
	// one-second window.
	chunkRates, tokenRates, byteRates []float64
	streams, exact                    int64
	firstFailure                      string
	note                              string
	cpu                               string // cores used while it ran
}

func (r tputResult) summary() string {
	s := summarize(r.chunkRates)
	t := summarize(r.tokenRates)
	out := fmt.Sprintf("%d of %d streams exact; %.1f tokens per chunk; CPU %s", r.exact, r.streams, t.Median/max(s.Median, 1), r.cpu)
	if r.firstFailure != "" {
		out += "; first failure: " + r.firstFailure
	}
	return out
}

// tputLoad runs plan.tputStreams clients streaming conv back to back for a
// second of warm-up plus plan.tputDuration, and counts chunks and tokens in
// one-second windows after the warm-up.
func (b *bench) tputLoad(ctx context.Context, sys *system, label, url string, conv conversation) (tputResult, error) {
	p := b.plan
	var chunks, tokens, contentBytes, streams, exact atomic.Int64
	hc := newHTTPClient(p.tputStreams, true)
	defer hc.CloseIdleConnections()
	deadline := time.Now().Add(time.Second + p.tputDuration)
	cpu := b.meterCPU(sys)

	var res tputResult
	stopWindows := make(chan struct{})
	var sampler sync.WaitGroup
	sampler.Go(func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		lastC, lastT, lastB := int64(0), int64(0), int64(0)
		for i := 0; ; i++ {
			select {
			case <-stopWindows:
				return
			case now := <-t.C:
				c, tk, by := chunks.Load(), tokens.Load(), contentBytes.Load()
				dc, dt, db := c-lastC, tk-lastT, by-lastB
				lastC, lastT, lastB = c, tk, by
				if i > 0 && !now.After(deadline.Add(100*time.Millisecond)) {
					res.chunkRates = append(res.chunkRates, float64(dc))
					res.tokenRates = append(res.tokenRates, float64(dt))
					res.byteRates = append(res.byteRates, float64(db))
				}
				if i%5 == 4 {
					b.log.printf("  throughput, %s: %d chunks/s, %d tokens/s, %d streams done", label, dc, dt, streams.Load())
				}
			}
		}
	})
	var clients sync.WaitGroup
	var failMu sync.Mutex
	for range p.tputStreams {
		clients.Go(func() {
			for time.Now().Before(deadline) && ctx.Err() == nil {
				counter := newTokenCounter(conv)
				sctx, cancel := context.WithTimeout(ctx, time.Minute)
				r := runStream(sctx, hc, url, conv, streamOpts{onEvent: func(ev *event, _ time.Time) {
					if ev.Content == "" {
						return
					}
					chunks.Add(1)
					contentBytes.Add(int64(len(ev.Content)))
					tokens.Add(int64(counter.add(ev.Content)))
				}})
				cancel()
				streams.Add(1)
				if r.exact(conv.answer) {
					exact.Add(1)
					continue
				}
				failMu.Lock()
				if res.firstFailure == "" {
					res.firstFailure = fmt.Sprintf("stream %s: %v (%d of %d bytes)", r.StreamID, r.Err, len(r.Text), len(conv.answer))
				}
				failMu.Unlock()
			}
		})
	}
	clients.Wait()
	close(stopWindows)
	sampler.Wait()
	res.streams, res.exact, res.cpu = streams.Load(), exact.Load(), cpu.String()
	if len(res.chunkRates) == 0 {
		return res, errors.New("throughput: no complete one-second window")
	}
	return res, ctx.Err()
}

// ceiling publishes messages of size bytes asynchronously into a scratch
// stream, with as many replicas as the relay's, for the plan's duration
// and returns the acknowledged messages per one-second window.
func (b *bench) ceiling(ctx context.Context, size int) (dist, error) {
	const name = "BENCH_CEILING"
	_, err := b.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name: name, Subjects: []string{"bench.ceiling.*"}, Storage: jetstream.FileStorage, Replicas: len(b.natsProcs),
	})
	if err != nil {
		return dist{}, err
	}
	defer b.js.DeleteStream(context.WithoutCancel(ctx), name)

	payload := []byte(strings.Repeat("x", size))
	subjects := make([]string, 64)
	for i := range subjects {
		// As long as a chunk subject: "relay.chunks." and a 27-byte id.
		subjects[i] = fmt.Sprintf("bench.ceiling.s%026d", rand.Uint64())
	}
	var published atomic.Int64
	deadline := time.Now().Add(b.plan.ceilingDuration)
	stop := make(chan struct{})
	var rates []float64
	var sampler sync.WaitGroup
	sampler.Go(func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		last := int64(0)
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				acked := published.Load() - int64(b.js.PublishAsyncPending())
				rates = append(rates, float64(acked-last))
				last = acked
			}
		}
	})
	for i := 0; time.Now().Before(deadline) && ctx.Err() == nil; i++ {
		_, err := b.js.PublishAsync(subjects[i%len(subjects)], payload)
		if errors.Is(err, jetstream.ErrTooManyStalledMsgs) {
			continue
		}
		if err != nil {
			close(stop)
			sampler.Wait()
			return dist{}, fmt.Errorf("ceiling: %w", err)
		}
		published.Add(1)
	}
	close(stop)
	sampler.Wait()
	select {
	case <-b.js.PublishAsyncComplete():
	case <-time.After(10 * time.Second):
		return dist{}, errors.New("ceiling: async publishes not acknowledged within 10s")
	case <-ctx.Done():
		return dist{}, ctx.Err()
	}
	if len(rates) == 0 {
		return dist{}, errors.New("ceiling: no complete one-second window")
	}
	return summarize(rates), nil
}

func lastSeq(ctx context.Context, s jetstream.Stream) uint64 {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	info, err := s.Info(ctx)
	if err != nil {
		return 0
	}
	return info.State.LastSeq
}

// meanChunkBytes samples up to 200 frames stored in [first, last] and
// returns the mean payload size of the chunk frames among them.
func meanChunkBytes(ctx context.Context, s jetstream.Stream, first, last uint64) (int, error) {
	if last < first {
		return 0, errors.New("no chunk frames were stored")
	}
	step := max((last-first+1)/200, 1)
	total, n := 0, 0
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for seq := first; seq <= last; seq += step {
		msg, err := s.GetMsg(ctx, seq)
		if err != nil {
			continue // expired or deleted
		}
		if f, err := wire.DecodeFrame(msg.Data); err == nil && f.Kind == wire.KindChunk {
			total += len(msg.Data)
			n++
		}
	}
	if n == 0 {
		return 0, errors.New("no chunk frames among the samples")
	}
	return total / n, nil
}
