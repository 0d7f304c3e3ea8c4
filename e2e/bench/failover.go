package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/relaydev/relay/relay/wire"
)

// failover measures worker takeover: streams run on two workers, the one
// serving most of them is SIGKILLed, and for each of its streams the time
// from the kill to the next chunk at the client is recorded. Baseline: the
// same streams' chunk gaps before the kill. streams.ack_wait keeps its
// default.
func (b *bench) failover(ctx context.Context) ([]figure, error) {
	p := b.plan
	fo := mockSpec{model: "failover", tokens: p.failoverTokens, interval: 25 * time.Millisecond}
	sys, err := b.startSystem(ctx, systemSpec{name: "failover", mocks: []mockSpec{fo}, workers: 2, maxInflight: 64})
	if err != nil {
		return nil, err
	}
	defer sys.stop()
	var takeover, normal []time.Duration
	exact, total := 0, 0
	var failures []string
	for round := range p.failoverRounds {
		r, err := b.failoverRound(ctx, sys, fo, round)
		if err != nil {
			return nil, err
		}
		takeover = append(takeover, r.takeover...)
		normal = append(normal, r.normal...)
		exact, total = exact+r.exact, total+r.streams
		failures = append(failures, r.failures...)
	}
	f := figure{
		rank: rankFailover,
		Name: "worker failover: SIGKILL → next chunk at the client", Unit: "ms",
		Relay: ptr(summarize(ms(takeover))), Baseline: ptr(summarize(ms(normal))),
		BaselineName: "normal inter-chunk gap", Goal: "≤ 3 s (default settings)",
		Note: fmt.Sprintf("%d round(s), 2 workers, streams.ack_wait default (4s); %d of %d streams exact after the kill", p.failoverRounds, exact, total),
	}
	if len(failures) > 0 {
		f.Note += "; " + failures[0]
	}
	f.compare()
	f.Verdict = verdict(f.Relay.N > 0 && f.Relay.Max <= 3000 && exact == total)
	return []figure{f}, nil
}

type failoverResult struct {
	takeover, normal []time.Duration
	streams, exact   int
	failures         []string
}

// timedChunk is when a chunk arrived and which upstream attempt wrote it.
type timedChunk struct {
	at      time.Time
	attempt int
}

func (b *bench) failoverRound(ctx context.Context, sys *system, fo mockSpec, round int) (failoverResult, error) {
	n := b.plan.failoverStreams
	hc := newHTTPClient(n, true)
	defer hc.CloseIdleConnections()
	url := chatURL(sys.edge.URL)

	var mu sync.Mutex
	ids := make([]string, n)
	chunks := make([][]timedChunk, n)
	results := make([]streamResult, n)
	convs := make([]conversation, n)
	var wg sync.WaitGroup
	for i := range n {
		convs[i] = newConversation(fo.model, fmt.Sprintf("failover %d/%d", round, i), fo.tokens)
		wg.Go(func() {
			sctx, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			results[i] = runStream(sctx, hc, url, convs[i], streamOpts{
				onOpen: func(s *opened) { mu.Lock(); ids[i] = s.streamID; mu.Unlock() },
				onEvent: func(ev *event, at time.Time) {
					if ev.Content != "" {
						mu.Lock()
						chunks[i] = append(chunks[i], timedChunk{at, ev.Attempt})
						mu.Unlock()
					}
				},
			})
		})
	}
	defer wg.Wait()

	// Kill once every stream is well under way.
	ready := func() bool {
		mu.Lock()
		defer mu.Unlock()
		for i := range n {
			if len(chunks[i]) < 20 {
				return false
			}
		}
		return true
	}
	for start := time.Now(); !ready(); {
		if time.Since(start) > 30*time.Second {
			return failoverResult{}, fmt.Errorf("failover round %d: streams did not start", round)
		}
		if err := sleep(ctx, 20*time.Millisecond); err != nil {
			return failoverResult{}, err
		}
	}
	chunkStream, err := b.js.Stream(ctx, wire.ChunkStream)
	if err != nil {
		return failoverResult{}, err
	}
	mu.Lock()
	owners := make([]string, n)
	for i, id := range ids {
		if owners[i], err = claimant(ctx, chunkStream, id); err != nil {
			mu.Unlock()
			return failoverResult{}, err
		}
	}
	mu.Unlock()
	counts := map[string]int{}
	for _, o := range owners {
		counts[o]++
	}
	victimName := ""
	for name, c := range counts {
		if victimName == "" || c > counts[victimName] {
			victimName = name
		}
	}
	vi, ok := sys.workerByName(victimName)
	if !ok {
		return failoverResult{}, fmt.Errorf("failover: claim names unknown worker %q", victimName)
	}
	killAt := time.Now()
	if err := sys.workers[vi].Kill(); err != nil {
		return failoverResult{}, err
	}
	b.log.printf("  failover round %d: SIGKILLed %s, which served %d of %d streams", round+1, victimName, counts[victimName], n)
	wg.Wait()

	var res failoverResult
	for i := range n {
		res.streams++
		if results[i].exact(convs[i].answer) {
			res.exact++
		} else {
			res.failures = append(res.failures, fmt.Sprintf("stream %s: %v (%d of %d bytes)", ids[i], results[i].Err, len(results[i].Text), len(convs[i].answer)))
		}
		if owners[i] != victimName {
			continue
		}
		cs := chunks[i]
		k := slices.IndexFunc(cs, func(c timedChunk) bool { return c.at.After(killAt) })
		if k <= 0 {
			res.failures = append(res.failures, fmt.Sprintf("stream %s: no chunk after the kill", ids[i]))
			continue
		}
		for j := 1; j < k; j++ {
			res.normal = append(res.normal, cs[j].at.Sub(cs[j-1].at))
		}
		// Chunks the killed worker had published may still arrive just
		// after the kill; the next chunk is the first of a new attempt.
		before := cs[k-1].attempt
		next := slices.IndexFunc(cs[k:], func(c timedChunk) bool { return c.attempt > before })
		if next < 0 {
			res.failures = append(res.failures, fmt.Sprintf("stream %s: no new attempt after the kill", ids[i]))
			continue
		}
		res.takeover = append(res.takeover, cs[k+next].at.Sub(killAt))
	}
	w, err := b.h.Restart(ctx, sys.workers[vi])
	if err != nil {
		return res, err
	}
	sys.workers[vi] = w
	return res, nil
}
