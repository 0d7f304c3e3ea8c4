package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/relaydev/relay/e2e/procs"
	"github.com/relaydev/relay/relay/mockupstream"
)

// The hedging mode (--hedge) measures what first_token_sla buys against
// an upstream whose time to first token has a heavy tail, and what it
// costs: two fake upstreams with the same distribution serve two models
// through one worker and one edge, "hedged" (hedging on) and "plain"
// (off), and the requests alternate between them in the same run, so
// both see the same machine and the same draws.

// hedgeSpec is the upstream and the setting the mode measures.
var hedgeSpec = struct {
	ttft          mockupstream.TTFT
	tokens        int
	interval      time.Duration
	sla           time.Duration
	budget        float64
	concurrency   int
	defaultN      int
	plain, hedged string
}{
	ttft:   mockupstream.TTFT{P50: 50 * time.Millisecond, Tail: 0.05, TailDelay: 3 * time.Second},
	tokens: 20, interval: 5 * time.Millisecond,
	sla: 300 * time.Millisecond, budget: 0.1,
	concurrency: 8, defaultN: 400,
	plain: "plain", hedged: "hedged",
}

// hedgeResult is one model's requests.
type hedgeResult struct {
	ttft         []time.Duration
	exact, total int
	calls        int // upstream calls, on both fakes
	failures     []string
}

// hedgeMode runs n requests of each model and prints the table.
func (b *bench) hedgeMode(ctx context.Context, n int, w io.Writer) error {
	if err := b.connect(ctx); err != nil {
		return err
	}
	defer b.nc.Close()
	s := hedgeSpec
	sys, err := b.startHedgeSystem(ctx)
	if err != nil {
		return err
	}
	defer sys.stop()
	convs := map[string][]conversation{}
	for _, model := range []string{s.plain, s.hedged} {
		for i := range n {
			convs[model] = append(convs[model], newConversation(model, fmt.Sprintf("hedge %s %d", model, i), s.tokens))
		}
	}
	results := map[string]*hedgeResult{s.plain: {}, s.hedged: {}}
	var mu sync.Mutex
	jobs := make(chan conversation)
	hc := newHTTPClient(s.concurrency, true)
	defer hc.CloseIdleConnections()
	var wg sync.WaitGroup
	for range s.concurrency {
		wg.Go(func() {
			for conv := range jobs {
				sctx, cancel := context.WithTimeout(ctx, time.Minute)
				r := runStream(sctx, hc, chatURL(sys.edge.URL), conv, streamOpts{})
				cancel()
				mu.Lock()
				res := results[conv.model]
				res.total++
				if r.exact(conv.answer) {
					res.exact++
					res.ttft = append(res.ttft, r.TTFT())
				} else {
					res.failures = append(res.failures, fmt.Sprintf("%s: %v", conv.model, r.Err))
				}
				mu.Unlock()
			}
		})
	}
	b.log.printf("hedge: %d requests of each model, %d at a time", n, s.concurrency)
	for i := range n {
		for _, model := range []string{s.plain, s.hedged} {
			select {
			case jobs <- convs[model][i]:
			case <-ctx.Done():
			}
		}
	}
	close(jobs)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return err
	}
	for model, res := range results {
		for _, c := range convs[model] {
			k, err := upstreamCalls(ctx, sys, c)
			if err != nil {
				return err
			}
			res.calls += k
		}
	}
	writeHedgeTable(w, n, results[s.plain], results[s.hedged])
	return nil
}

// startHedgeSystem starts the two fakes, serving both models, one worker
// that hedges "hedged", and an edge.
func (b *bench) startHedgeSystem(ctx context.Context) (*system, error) {
	s := hedgeSpec
	if err := b.purge(ctx); err != nil {
		return nil, err
	}
	sys := &system{h: b.h, mocks: map[string]*procs.Process{}}
	for _, name := range []string{"tail-a", "tail-b"} {
		p, err := b.h.Start(ctx, procs.Role{
			Role: procs.MockUpstream, Name: "hedge-mock-" + name,
			Settings: procs.Settings{
				"mock_upstream.tokens":          s.tokens,
				"mock_upstream.token_interval":  s.interval.String(),
				"mock_upstream.models":          []string{s.plain, s.hedged},
				"mock_upstream.ttft.p50":        s.ttft.P50.String(),
				"mock_upstream.ttft.tail":       s.ttft.Tail,
				"mock_upstream.ttft.tail_delay": s.ttft.TailDelay.String(),
			},
		})
		if err != nil {
			sys.stop()
			return nil, err
		}
		sys.mocks[name] = p
		sys.providers = append(sys.providers, p.Provider(name, s.plain, s.hedged))
	}
	// plain turns off the hedging every model has by default.
	models := []map[string]any{{"name": s.hedged, "first_token_sla": s.sla.String(), "hedge_budget": s.budget}, {"name": s.plain, "first_token_sla": "-1s"}}
	wk, err := b.h.Start(ctx, procs.Role{
		Role: procs.Worker, Name: "hedge-worker", NATS: b.nats, Providers: sys.providers,
		Settings: procs.Settings{"worker.max_inflight": 4 * s.concurrency, "models": models},
	})
	if err != nil {
		sys.stop()
		return nil, err
	}
	sys.workers = append(sys.workers, wk)
	e, err := b.h.Start(ctx, procs.Role{Role: procs.Edge, Name: "hedge-edge", NATS: b.nats, Providers: sys.providers})
	if err != nil {
		sys.stop()
		return nil, err
	}
	sys.edge = e
	return sys, nil
}

// upstreamCalls counts the calls both fakes had of conversation c.
func upstreamCalls(ctx context.Context, sys *system, c conversation) (int, error) {
	key := mockupstream.ConversationKey(c.msgs)
	n := 0
	for _, m := range sys.mocks {
		st, err := mockStats(ctx, m.URL)
		if err != nil {
			return 0, err
		}
		n += st.ByConversation[key]
	}
	return n, nil
}

// mockStats reads a fake upstream's counters; url is its base URL.
func mockStats(ctx context.Context, url string) (mockupstream.Stats, error) {
	var st mockupstream.Stats
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(url, "/v1")+"/mock/stats", nil)
	if err != nil {
		return st, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

// writeHedgeTable prints the mode's table.
func writeHedgeTable(w io.Writer, n int, plain, hedged *hedgeResult) {
	s := hedgeSpec
	fmt.Fprintf(w, "## relay benchmark: hedging (%d requests of each model, %d at a time)\n\n", n, s.concurrency)
	fmt.Fprintf(w, "- upstream: 2 fake providers, time to first token p50 %v (log-normal), %.0f %% of calls at %v; %d tokens at %v/token\n",
		s.ttft.P50, 100*s.ttft.Tail, s.ttft.TailDelay, s.tokens, s.interval)
	fmt.Fprintf(w, "- hedged: first_token_sla %v, hedge_budget %v; plain: no hedging; the requests alternate between them\n", s.sla, s.budget)
	fmt.Fprintf(w, "- command: `%s`; date: %s\n\n", command(), time.Now().UTC().Format(time.RFC3339))
	fmt.Fprintln(w, "| model | TTFT median | TTFT p99 | TTFT max | upstream calls | extra calls | exact |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|")
	for _, row := range []struct {
		name string
		r    *hedgeResult
	}{{"plain (no hedging)", plain}, {fmt.Sprintf("hedged (%v SLA)", s.sla), hedged}} {
		d := summarize(ms(row.r.ttft))
		extra := row.r.calls - row.r.total
		pct := 0.0
		if row.r.total > 0 {
			pct = 100 * float64(extra) / float64(row.r.total)
		}
		fmt.Fprintf(w, "| %s | %s ms | %s ms | %s ms | %d | %d (%.1f %%) | %d/%d |\n",
			row.name, num(d.Median), num(d.P99), num(d.Max), row.r.calls, extra, pct, row.r.exact, row.r.total)
	}
	for _, r := range []*hedgeResult{plain, hedged} {
		if len(r.failures) > 0 {
			fmt.Fprintf(w, "\n- %d failed, first: %s\n", len(r.failures), r.failures[0])
		}
	}
}
