package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"
)

// resume measures reconnecting to a long finished stream: from sending
// GET /v1/streams/{id} with a Last-Event-ID to the first replayed chunk.
// The stream has resumeChunks chunks, written while resumeOthers other
// streams were written, so its frames are interleaved with theirs in the
// log. Baseline: the first chunk of a fresh stream. Both dial a new
// connection every time, as a reconnecting client does.
func (b *bench) resume(ctx context.Context) ([]figure, error) {
	p := b.plan
	// One token per chunk: the worker publishes a chunk in well under 5 ms,
	// even on a loaded machine.
	long := mockSpec{model: "long", tokens: p.resumeChunks, interval: 5 * time.Millisecond}
	streamLen := time.Duration(long.tokens) * long.interval
	// The others last as long as the long one, so they interleave with all
	// of it.
	other := mockSpec{model: "other", tokens: 20, interval: streamLen / 20}
	fresh := mockSpec{model: "fresh", tokens: 5, interval: -1}
	sys, err := b.startSystem(ctx, systemSpec{
		name: "resume", mocks: []mockSpec{long, other, fresh}, workers: 2, maxInflight: p.resumeOthers/2 + 64,
	})
	if err != nil {
		return nil, err
	}
	defer sys.stop()
	url := chatURL(sys.edge.URL)
	hc := newHTTPClient(p.resumeOthers+1, true)
	defer hc.CloseIdleConnections()

	// The others first; the long stream once they are all open.
	var allOpen sync.WaitGroup
	allOpen.Add(p.resumeOthers)
	var mu sync.Mutex
	othersExact := 0
	var all sync.WaitGroup
	for i := range p.resumeOthers {
		conv := newConversation(other.model, fmt.Sprintf("interleaved %d", i), other.tokens)
		all.Go(func() {
			once := sync.OnceFunc(allOpen.Done)
			defer once()
			sctx, cancel := context.WithTimeout(ctx, streamLen+time.Minute)
			defer cancel()
			r := runStream(sctx, hc, url, conv, streamOpts{onOpen: func(*opened) { once() }})
			mu.Lock()
			defer mu.Unlock()
			if r.exact(conv.answer) {
				othersExact++
			}
		})
	}
	allOpen.Wait()
	b.log.printf("  resume: %d interleaved streams open; writing the %d-chunk stream", p.resumeOthers, long.tokens)
	conv := newConversation(long.model, "a long answer to resume", long.tokens)
	sctx, cancel := context.WithTimeout(ctx, streamLen+time.Minute)
	target := runStream(sctx, hc, url, conv, streamOpts{ids: true})
	cancel()
	all.Wait()
	if !target.exact(conv.answer) {
		return nil, fmt.Errorf("the long stream was not delivered exactly: %v (%d of %d bytes)", target.Err, len(target.Text), len(conv.answer))
	}
	if len(target.IDs) < 2 {
		return nil, errors.New("the long stream has fewer than 2 chunks")
	}

	dial := newHTTPClient(1, false)
	lat := make([]time.Duration, 0, p.resumeSamples)
	// By how much of the stream is left to replay: the first and the last
	// fifth of cursors.
	var early, late []time.Duration
	for range p.resumeSamples {
		k := rand.IntN(len(target.IDs) - 1)
		d, err := resumeOnce(ctx, dial, sys.edge.URL+"/v1/streams/"+target.StreamID, target.IDs[k], target.IDs[k+1])
		if err != nil {
			return nil, err
		}
		lat = append(lat, d)
		switch {
		case k < len(target.IDs)/5:
			early = append(early, d)
		case k >= len(target.IDs)*4/5:
			late = append(late, d)
		}
	}
	freshLat := make([]time.Duration, 0, p.resumeSamples)
	for i := range p.resumeSamples {
		c := newConversation(fresh.model, fmt.Sprintf("fresh %d", i), fresh.tokens)
		sctx, cancel := context.WithTimeout(ctx, time.Minute)
		r := runStream(sctx, dial, url, c, streamOpts{})
		cancel()
		if !r.exact(c.answer) {
			return nil, fmt.Errorf("fresh stream: %v", r.Err)
		}
		freshLat = append(freshLat, r.TTFT())
	}
	f := figure{
		rank: rankResume,
		Name: fmt.Sprintf("resume: reconnect → first replayed chunk (%d-chunk stream, %d interleaved)", len(target.IDs), p.resumeOthers),
		Unit: "ms", Relay: ptr(summarize(ms(lat))), Baseline: ptr(summarize(ms(freshLat))),
		BaselineName: "fresh stream's first chunk", Goal: "p99 ≤ 10 ms",
		Note: fmt.Sprintf("resumed after a random chunk of the finished stream: median %.1f ms with ≥ 80 %% of it left to replay, %.1f ms with ≤ 20 %%; %d of %d interleaved streams exact; new TCP connection per request on both sides",
			summarize(ms(early)).Median, summarize(ms(late)).Median, othersExact, p.resumeOthers),
	}
	f.compare()
	f.Verdict = verdict(f.Relay.P99 <= 10)
	return []figure{f}, nil
}

// resumeOnce reconnects after cursor and returns the time until the first
// replayed event, which must be the one after it.
func resumeOnce(ctx context.Context, hc *http.Client, url, cursor, want string) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	start := time.Now()
	s, err := open(ctx, hc, http.MethodGet, url, nil, cursor)
	if err != nil {
		return 0, fmt.Errorf("resume after %s: %w", cursor, err)
	}
	defer s.Close()
	var ev event
	if err := s.sse.next(&ev); err != nil {
		return 0, fmt.Errorf("resume after %s: %w", cursor, err)
	}
	d := time.Since(start)
	if ev.ID != want {
		return 0, fmt.Errorf("resume after %s: first event %s, want %s", cursor, ev.ID, want)
	}
	return d, nil
}
