package edge

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relaydev/relay/relay/spend"
	"github.com/relaydev/relay/relay/wire"
)

// counterSum sums the counters of family name the edge exports.
func counterSum(t *testing.T, s *Server, name string) float64 {
	t.Helper()
	families, err := s.obs.gatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			sum += m.GetCounter().GetValue()
		}
	}
	return sum
}

// A key's monthly cost budget, counted from the usage ledger: past
// warn_at the edge warns once per period (counted once however many
// requests follow), and once the budget is used up the key's generations
// are refused 429 insufficient_quota until the month ends, while another
// tenant's pass. The requests the edge queues name their key, which the
// worker records their usage under.
func TestSpendWarnsOnceAndRefusesAtTheBudget(t *testing.T) {
	cfg := tenantConfig()
	cfg.APIKeys[0].Budget = spend.Limits{MonthlyCostUSD: 1}
	cfg.Spend = SpendConfig{WarnAt: 0.5}
	e := newEnv(t)
	edge := e.startEdge(cfg)
	w := e.startWorker(&worker{script: answer(2)})
	ctx := context.Background()
	kv, err := e.js.KeyValue(ctx, wire.UsageBucket)
	if err != nil {
		t.Fatal(err)
	}
	acmeKey := spend.KeyID(keyHash(keyAcme))
	now := time.Now()
	n := 0
	spent := func(cost float64) {
		t.Helper()
		n++
		// As the worker records a stream's usage (relay/worker).
		r := spend.Record{Tenant: "acme", Key: acmeKey, Day: spend.DayOf(now), Tokens: 10, CostUSD: cost}
		if _, err := spend.Store(ctx, kv, fmt.Sprintf("stream%d", n), r); err != nil {
			t.Fatal(err)
		}
	}
	monthCost := func() float64 {
		var u usageObject
		res := do(t, "GET", edge.url+"/v1/relay/usage", "", bearerHeader(keyAcme))
		if res.StatusCode != http.StatusOK {
			t.Fatalf("GET /v1/relay/usage: %d", res.StatusCode)
		}
		if err := jsonDecode(res, &u); err != nil {
			t.Fatal(err)
		}
		return u.Month.CostUSD
	}
	ask := func(key string, model string) *http.Response {
		return do(t, "POST", edge.url+"/v1/chat/completions",
			fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"hi"}]}`, model), bearerHeader(key))
	}
	served := func(what string) {
		t.Helper()
		if res := ask(keyAcme, testModel); res.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d %s", what, res.StatusCode, readAll(t, res))
		}
	}
	const warnings = "relay_edge_spend_warnings_total"

	spent(0.25)
	waitFor(t, func() bool { return monthCost() == 0.25 })
	served("under the warning threshold")
	if req := <-w.reqs; req.Key != acmeKey || req.Tenant != "acme" {
		t.Errorf("queued request of tenant %q, key %q; want acme, %s", req.Tenant, req.Key, acmeKey)
	}
	if got := counterSum(t, edge.Server, warnings); got != 0 {
		t.Errorf("%d warnings at 25%%", int(got))
	}
	spent(0.25)
	waitFor(t, func() bool { return monthCost() == 0.5 })
	served("at the warning threshold")
	served("past the warning threshold")
	if got := counterSum(t, edge.Server, warnings); got != 1 {
		t.Errorf("%v warnings past 50%%, want 1 (once per period)", got)
	}

	spent(0.5)
	waitFor(t, func() bool { return monthCost() == 1 })
	res := ask(keyAcme, testModel)
	body := readAll(t, res)
	if res.StatusCode != http.StatusTooManyRequests || !strings.Contains(body, `"code":"insufficient_quota"`) ||
		!strings.Contains(body, `"type":"insufficient_quota"`) {
		t.Fatalf("a used-up budget answered %d %s", res.StatusCode, body)
	}
	reset := spend.MonthEnd(time.Now())
	if !strings.Contains(body, "monthly cost budget of API key "+acmeKey) || !strings.Contains(body, reset.Format(time.RFC3339)) {
		t.Errorf("the refusal does not name the budget and its reset: %s", body)
	}
	retry, _ := strconv.ParseInt(res.Header.Get("Retry-After"), 10, 64)
	if until := int64(time.Until(reset) / time.Second); retry < until-5 || retry > until+5 {
		t.Errorf("Retry-After %q, want about %d s", res.Header.Get("Retry-After"), until)
	}
	if got := counterSum(t, edge.Server, "relay_edge_spend_refusals_total"); got != 1 {
		t.Errorf("%v refusals counted, want 1", got)
	}
	if res := ask(keyBeta, otherModel); res.StatusCode != http.StatusOK {
		t.Errorf("beta, without a budget, was answered %d", res.StatusCode)
	}
}

// Without budgets the edge reads no ledger and refuses nothing.
func TestSpendOffByDefault(t *testing.T) {
	e := newEnv(t)
	edge := e.startEdge(tenantConfig())
	if edge.spend.enabled() {
		t.Fatal("budgets enabled without any configured")
	}
	e.startWorker(&worker{script: answer(1)})
	if res := do(t, "POST", edge.url+"/v1/chat/completions", chatBody(false, "hi"), bearerHeader(keyAcme)); res.StatusCode != http.StatusOK {
		t.Fatalf("%d", res.StatusCode)
	}
	edge.spend.mu.Lock()
	defer edge.spend.mu.Unlock()
	if edge.spend.tally != nil {
		t.Error("the ledger was followed for a request without budgets")
	}
}

func TestSpendConfigValidate(t *testing.T) {
	base := tenantConfig()
	for _, c := range []struct {
		name string
		edit func(*Config)
		want string // "": valid
	}{
		{"budgets", func(c *Config) {
			c.APIKeys[0].Budget = spend.Limits{DailyTokens: 10}
			c.Spend = SpendConfig{WarnAt: 0.9, Tenants: []TenantSpend{{Tenant: "acme", Limits: spend.Limits{MonthlyCostUSD: 5},
				Soft: spend.Limits{MonthlyCostUSD: 4}, Downgrade: []Downgrade{{From: testModel, To: otherModel}}}}}
		}, ""},
		{"negative key budget", func(c *Config) { c.APIKeys[1].Budget = spend.Limits{MonthlyTokens: -1} },
			"edge.api_keys[1].budget.monthly_tokens: must not be negative"},
		{"negative warn_at", func(c *Config) { c.Spend.WarnAt = -0.1 }, "edge.spend.warn_at: must not be negative"},
		{"bad tenant", func(c *Config) { c.Spend.Tenants = []TenantSpend{{Tenant: "a b"}} }, `edge.spend.tenants[0].tenant: "a b"`},
		{"tenant twice", func(c *Config) { c.Spend.Tenants = []TenantSpend{{Tenant: "acme"}, {Tenant: "acme"}} }, `edge.spend.tenants[1].tenant: "acme" is configured twice`},
		{"downgrade without soft", func(c *Config) {
			c.Spend.Tenants = []TenantSpend{{Tenant: "acme", Downgrade: []Downgrade{{From: testModel, To: otherModel}}}}
		}, "edge.spend.tenants[0].downgrade: needs a soft limit"},
		{"downgrade to itself", func(c *Config) {
			c.Spend.Tenants = []TenantSpend{{Tenant: "acme", Soft: spend.Limits{DailyTokens: 1}, Downgrade: []Downgrade{{From: testModel, To: testModel}}}}
		}, "edge.spend.tenants[0].downgrade[0]: want two different models"},
	} {
		cfg := base
		cfg.APIKeys = append([]APIKey(nil), base.APIKeys...)
		c.edit(&cfg)
		err := cfg.Validate("edge")
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.HasPrefix(err.Error(), c.want)):
			t.Errorf("%s: err = %v, want %q", c.name, err, c.want)
		}
	}
	cfg := base
	cfg.Spend.Tenants = []TenantSpend{{Tenant: "acme", Soft: spend.Limits{DailyTokens: 1}, Downgrade: []Downgrade{{From: testModel, To: "gpt-unknown"}}}}
	if err := cfg.Spend.checkModels(testCatalog(t)); err == nil || !strings.Contains(err.Error(), `"gpt-unknown" is not served`) {
		t.Errorf("a downgrade to an unserved model: %v", err)
	}
}

// A request's hold lasts until its real cost is known: while an answered
// generation's usage is not in the ledger yet, its hold takes up the
// key's small budget and the next request gets 429 rate_limit_exceeded
// with Retry-After; once the ledger records it, the hold gives way to
// the record. A generation that ends without usage, which the ledger will
// never record, releases its hold at once.
func TestSpendHoldSettlesOnRecordOrRelease(t *testing.T) {
	cfg := tenantConfig()
	cfg.APIKeys[0].Budget = spend.Limits{DailyTokens: 100}
	e := newEnv(t)
	edge := e.startEdge(cfg)
	var usage atomic.Bool
	w := e.startWorker(&worker{script: func(r wire.Request) []wire.Frame {
		if usage.Load() {
			return answer(2)(r)
		}
		return []wire.Frame{{Kind: wire.KindEnd, Status: wire.StatusFailed, Attempts: 1,
			Error: &wire.Error{Message: "upstream failed", Type: wire.TypeUpstream, Status: http.StatusBadGateway}}}
	}})
	ask := func() *http.Response {
		return do(t, "POST", edge.url+"/v1/chat/completions", chatBody(false, "hi"), bearerHeader(keyAcme))
	}

	for i := range 3 {
		if res := ask(); res.StatusCode != http.StatusBadGateway {
			t.Fatalf("request %d without usage: %d %s, want the upstream's 502 (its predecessor's hold released)", i, res.StatusCode, readAll(t, res))
		}
		<-w.reqs
	}

	usage.Store(true)
	if res := ask(); res.StatusCode != http.StatusOK {
		t.Fatalf("first answer: %d %s", res.StatusCode, readAll(t, res))
	}
	first := <-w.reqs
	res := ask()
	body := readAll(t, res)
	if res.StatusCode != http.StatusTooManyRequests || !strings.Contains(body, `"code":"rate_limit_exceeded"`) ||
		!strings.Contains(body, "taken up by requests in progress") || res.Header.Get("Retry-After") == "" {
		t.Fatalf("a budget held by an answer not yet recorded: %d %s (Retry-After %q)", res.StatusCode, body, res.Header.Get("Retry-After"))
	}
	kv, err := e.js.KeyValue(context.Background(), wire.UsageBucket)
	if err != nil {
		t.Fatal(err)
	}
	r := spend.NewRecord("acme", first.Key, time.Now(), &wire.Usage{TotalTokens: 5}, 0)
	if _, err := spend.Store(context.Background(), kv, first.StreamID, r); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		res := ask()
		readAll(t, res)
		return res.StatusCode == http.StatusOK
	})
}
