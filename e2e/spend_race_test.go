package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relaydev/relay/edge"
	"github.com/relaydev/relay/relay/config"
	"github.com/relaydev/relay/relay/mockupstream"
	"github.com/relaydev/relay/relay/spend"
)

// burstResult is what a burst of concurrent requests was answered.
type burstResult struct {
	served   int64 // tokens, the sum of the answers' usage
	ok       int
	refusals map[string]int // by error code
}

// burst sends n copies of body at once, alternating the edges, and sums
// the usage of the answers; every refusal must be a 429 with Retry-After.
func burst(t *testing.T, ctx context.Context, sys *system, n int, body []byte, key string) burstResult {
	t.Helper()
	var mu sync.Mutex
	res := burstResult{refusals: map[string]int{}}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			resp := send(t, ctx, "POST", sys.Edges[i%len(sys.Edges)]+"/v1/chat/completions", body, key, nil)
			if resp.StatusCode != http.StatusOK {
				status, code, raw := errorOf(t, resp)
				if status != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
					t.Errorf("refused %d (Retry-After %q): %s", status, resp.Header.Get("Retry-After"), raw)
				}
				mu.Lock()
				res.refusals[code]++
				mu.Unlock()
				return
			}
			var c completion
			err := json.NewDecoder(resp.Body).Decode(&c)
			resp.Body.Close()
			if err != nil || c.Usage.TotalTokens == 0 {
				t.Errorf("an answer without usage: %v", err)
			}
			mu.Lock()
			res.served += c.Usage.TotalTokens
			res.ok++
			mu.Unlock()
		})
	}
	close(start)
	wg.Wait()
	return res
}

// 200 concurrent requests of one tenant against its token budget, and 200
// of another tenant against its key's, spread over two edges, are served
// at most one request's largest cost past the budget (its prompt counted
// at a token a byte, plus its max_tokens): each request holds that much
// from admission until the ledger records its real cost, and the holds
// are serialized cluster-wide. The rest are refused with 429 and
// Retry-After, and the ledger counts exactly what was served.
func TestSpendBudgetsHoldUnderConcurrency(t *testing.T) {
	const (
		tenantBudget, keyBudget = 1000, 300
		requests, maxTokens     = 200, 8
	)
	sys := start(t, options{Edges: 2, Secured: true, Mock: mockupstream.Config{Tokens: maxTokens, TokenInterval: 20 * time.Millisecond},
		Tune: withTenants(func(c *config.Config) {
			c.Edge.Spend.Tenants = []edge.TenantSpend{{Tenant: "acme", Limits: spend.Limits{DailyTokens: tenantBudget}}}
			c.Edge.APIKeys[1].Budget = spend.Limits{MonthlyTokens: keyBudget}
		})})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	body := func(model string) []byte {
		b, err := json.Marshal(map[string]any{"model": model, "max_tokens": maxTokens,
			"messages": []mockupstream.Message{{Role: "user", Content: "May I spend it all at once?"}}})
		must(t, err)
		return b
	}
	for _, c := range []struct {
		name, key, model string
		budget           int64
		used             func(usageReport) int64
	}{
		{"tenant budget", keyAcme, "mock-1", tenantBudget, func(u usageReport) int64 { return u.Day.Tokens }},
		{"key budget", keyBeta, "mock-2", keyBudget, func(u usageReport) int64 { return u.Keys[0].Day.Tokens }},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := body(c.model)
			largest := int64(len(b) + maxTokens)
			res := burst(t, ctx, sys, requests, b, c.key)
			t.Logf("served %d tokens in %d answers; refused %v; budget %d, largest cost %d", res.served, res.ok, res.refusals, c.budget, largest)
			if res.served > c.budget+largest {
				t.Errorf("%d tokens served against a budget of %d: more than one request's largest cost (%d) past it", res.served, c.budget, largest)
			}
			if res.ok == 0 || res.ok == requests {
				t.Errorf("%d of %d requests served", res.ok, requests)
			}
			var u usageReport
			waitFor(t, 10*time.Second, "the ledger to count what was served", func() bool {
				u = readUsage(t, ctx, sys.Edges[1], c.key)
				return len(u.Keys) == 1 && c.used(u) == res.served
			})
		})
	}
}

// Forwarded completions and embeddings count in the budgets: each
// answer's usage is recorded in the ledger (GET /v1/relay/usage shows
// it), and once the key's budget is used up both endpoints refuse it with
// 429 insufficient_quota. n, best_of and max_tokens over the tenant's caps
// get a 400 naming the parameter, on chat and forwarded completions alike.
func TestSpendCountsForwardedAndCapsChoices(t *testing.T) {
	const budget = 60
	sys := start(t, options{Secured: true, Mock: mockupstream.Config{Tokens: 8, TokenInterval: -1},
		Tune: withTenants(func(c *config.Config) {
			c.Edge.APIKeys[0].Budget = spend.Limits{DailyTokens: budget}
			c.Edge.Spend.Tenants = []edge.TenantSpend{{Tenant: "acme", MaxTokens: 1024, MaxBestOf: 2}}
		})})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	post := func(path, body string) *http.Response {
		return send(t, ctx, "POST", sys.Edge+path, []byte(body), keyAcme, nil)
	}

	for _, c := range []struct{ path, body, param, code string }{
		{"/v1/completions", `{"model":"mock-1","prompt":"hi","n":128}`, "n", edge.CodeAboveMax},
		{"/v1/completions", `{"model":"mock-1","prompt":"hi","best_of":3}`, "best_of", edge.CodeAboveMax},
		{"/v1/completions", `{"model":"mock-1","prompt":"hi","max_tokens":32768}`, "max_tokens", edge.CodeLimitExceeded},
		{"/v1/chat/completions", `{"model":"mock-1","messages":[{"role":"user","content":"hi"}],"max_tokens":32768}`, "max_tokens", edge.CodeLimitExceeded},
		{"/v1/chat/completions", `{"model":"mock-1","messages":[{"role":"user","content":"hi"}],"n":128}`, "n", "invalid_value"},
	} {
		resp := post(c.path, c.body)
		status, code, raw := errorOf(t, resp)
		if status != http.StatusBadRequest || code != c.code || !strings.Contains(raw, fmt.Sprintf(`"param":%q`, c.param)) {
			t.Errorf("%s %s: %d %s, want 400 %s naming %s", c.path, c.body, status, raw, c.code, c.param)
		}
	}

	var served int64
	answered := func(resp *http.Response) bool {
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(resp.Body)
			t.Fatalf("%d %s", resp.StatusCode, b)
		}
		var v struct {
			Usage struct {
				TotalTokens int64 `json:"total_tokens"`
			} `json:"usage"`
		}
		must(t, json.NewDecoder(resp.Body).Decode(&v))
		if v.Usage.TotalTokens == 0 {
			t.Fatal("a forwarded answer without usage")
		}
		served += v.Usage.TotalTokens
		waitFor(t, 10*time.Second, "the ledger to count the forwarded answer", func() bool {
			return readUsage(t, ctx, sys.Edge, keyAcme).Day.Tokens == served
		})
		return served < budget
	}
	for i := 0; ; i++ {
		var more bool
		if i%2 == 0 {
			more = answered(post("/v1/completions", `{"model":"mock-1","prompt":"How much is left?","max_tokens":8}`))
		} else {
			more = answered(post("/v1/embeddings", `{"model":"mock-1","input":"How much is left?"}`))
		}
		if !more {
			break
		}
		if i > 100 {
			t.Fatalf("%d tokens served and no budget reached", served)
		}
	}
	for _, c := range []struct{ path, body string }{
		{"/v1/completions", `{"model":"mock-1","prompt":"One more?","max_tokens":8}`},
		{"/v1/embeddings", `{"model":"mock-1","input":"One more?"}`},
	} {
		resp := post(c.path, c.body)
		status, code, raw := errorOf(t, resp)
		if status != http.StatusTooManyRequests || code != edge.CodeInsufficientQuota || resp.Header.Get("Retry-After") == "" {
			t.Errorf("%s past the budget: %d %s", c.path, status, raw)
		}
	}
}
