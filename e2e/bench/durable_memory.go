package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/relaydev/relay/e2e/procs"
)

// durableMemory measures the edge's resident memory per open live=sse
// reader of Durable Streams: durableReaders readers of one stream, then
// as many streams with one reader each, and as the baseline as many of
// the relay's own SSE streams (generations held open by a fake upstream
// that waits a minute between tokens). Each count runs on a fresh edge:
// (RSS with every reader open − RSS before the first) / readers, the
// median of a few samples. A Go process keeps the heap a closed load
// used, so an edge measured twice would count the second load as free.
func (b *bench) durableMemory(ctx context.Context, sys *system, ds dsClient, held mockSpec) ([]figure, error) {
	n := b.plan.durableReaders
	many := make([]string, n)
	for i := range many {
		many[i] = fmt.Sprintf("readers-%d", i)
	}
	if err := forEach(ctx, many, 16, func(ctx context.Context, name string) error {
		if err := ds.create(ctx, name); err != nil {
			return err
		}
		_, err := ds.appendMsg(ctx, name, dsMessage(0))
		return err
	}); err != nil {
		return nil, err
	}
	one := slices.Repeat([]string{"readers-0"}, n)
	perReader := func(names []string) func(ctx context.Context, edge string, i int) (*http.Response, error) {
		return func(ctx context.Context, edge string, i int) (*http.Response, error) {
			c := dsClient{hc: ds.hc, base: edge + "/ds/bench"}
			resp, err := c.do(ctx, http.MethodGet, names[i], "offset=now&live=sse", nil)
			if err == nil && resp.StatusCode != http.StatusOK {
				resp.Body.Close()
				err = fmt.Errorf("live=sse: HTTP %d", resp.StatusCode)
			}
			if err == nil {
				// The first control event says the reader is at the
				// tail and served.
				_, err = bufio.NewReaderSize(resp.Body, sseBuffer).ReadString('\n')
			}
			return resp, err
		}
	}
	oneStream, err := b.rssPerReader(ctx, sys, "ds-one", n, perReader(one))
	if err != nil {
		return nil, fmt.Errorf("readers of one stream: %w", err)
	}
	manyStreams, err := b.rssPerReader(ctx, sys, "ds-many", n, perReader(many))
	if err != nil {
		return nil, fmt.Errorf("readers of %d streams: %w", n, err)
	}
	relaySSE, err := b.rssPerReader(ctx, sys, "relay-sse", n, func(ctx context.Context, edge string, i int) (*http.Response, error) {
		conv := newConversation(held.model, fmt.Sprintf("held open %d", i), held.tokens)
		s, err := open(ctx, ds.hc, http.MethodPost, chatURL(edge), conv.body, "")
		if err != nil {
			return nil, err
		}
		return s.resp, nil
	})
	if err != nil {
		return nil, fmt.Errorf("relay SSE streams: %w", err)
	}
	base := ptr(summarize(relaySSE.perReader))
	note := fmt.Sprintf("(edge RSS with every reader open − its RSS before) / readers, %d samples 500 ms apart, each count on a fresh edge (idle %s MiB); readers at offset=now, each on its own connection; baseline: as many POST /v1/chat/completions streams open on a fresh edge, their generations waiting for a token",
		len(oneStream.perReader), num(oneStream.idle/1024))
	figs := []figure{
		{rank: rankDurable, Name: fmt.Sprintf("Durable Streams: edge RSS per open live=sse reader (%s readers of one stream)", num(float64(n))),
			Unit: "KiB", Relay: ptr(summarize(oneStream.perReader)), Baseline: base, BaselineName: "the relay's SSE stream", Note: note},
		{rank: rankDurable, Name: fmt.Sprintf("Durable Streams: edge RSS per open live=sse reader (%s streams, one reader each)", num(float64(n))),
			Unit: "KiB", Relay: ptr(summarize(manyStreams.perReader)), Baseline: base, BaselineName: "the relay's SSE stream"},
	}
	for i := range figs {
		figs[i].compare()
	}
	return figs, nil
}

// readerMemory is one count's memory: the fresh edge's idle RSS (KiB) and
// each sample's KiB per reader.
type readerMemory struct {
	idle      float64
	perReader []float64
}

// rssPerReader starts a fresh edge, opens n readers on it with open
// (reader i; the response must stay open), samples the edge's RSS, and
// stops the edge and the readers.
func (b *bench) rssPerReader(ctx context.Context, sys *system, name string, n int, open func(ctx context.Context, edge string, i int) (*http.Response, error)) (readerMemory, error) {
	edge, err := sys.h.Start(ctx, procs.Role{Role: procs.Edge, Name: "durable-" + name + "-edge", NATS: b.nats, Providers: sys.providers})
	if err != nil {
		return readerMemory{}, err
	}
	defer stopAll([]*procs.Process{edge})
	// A moment for the edge's start-up work (watchers, caches) to settle.
	if err := sleep(ctx, time.Second); err != nil {
		return readerMemory{}, err
	}
	idle, err := edge.RSS()
	if err != nil {
		return readerMemory{}, err
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var mu sync.Mutex
	var bodies []*http.Response
	defer func() {
		for _, r := range bodies {
			r.Body.Close()
		}
	}()
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	// As many opening at once as the concurrent phase: the edge holds
	// a relay stream's headers until its first frame, up to 2 s.
	err = forEach(rctx, idx, 512, func(ctx context.Context, i int) error {
		resp, err := open(rctx, edge.URL, i)
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		bodies = append(bodies, resp)
		return nil
	})
	if err != nil {
		return readerMemory{}, err
	}
	b.log.printf("  durable: %d %s readers open on a fresh edge", n, name)
	m := readerMemory{idle: float64(idle) / 1024}
	for range 4 {
		if err := sleep(ctx, 500*time.Millisecond); err != nil {
			return m, err
		}
		busy, err := edge.RSS()
		if err != nil {
			return m, err
		}
		m.perReader = append(m.perReader, float64(busy-idle)/1024/float64(n))
	}
	return m, nil
}

// forEach runs f on every item, at most par at once, and returns the
// first error.
func forEach[T any](ctx context.Context, items []T, par int, f func(context.Context, T) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	sem := make(chan struct{}, par)
	var wg sync.WaitGroup
	for _, it := range items {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := f(ctx, it); err != nil {
				cancel(err)
			}
		})
	}
	wg.Wait()
	return context.Cause(ctx)
}
