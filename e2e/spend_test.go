package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/relaydev/relay/edge"
	"github.com/relaydev/relay/relay/config"
	"github.com/relaydev/relay/relay/mockupstream"
	"github.com/relaydev/relay/relay/spend"
)

// usageReport is the body of GET /v1/relay/usage.
type usageReport struct {
	Tenant string `json:"tenant"`
	Day    struct {
		Period   string    `json:"period"`
		Tokens   int64     `json:"tokens"`
		ResetsAt time.Time `json:"resets_at"`
	} `json:"day"`
	Month struct {
		Tokens int64 `json:"tokens"`
	} `json:"month"`
	Budgets *spend.Limits `json:"budgets"`
	Keys    []struct {
		Key string `json:"key"`
		Day struct {
			Tokens int64 `json:"tokens"`
		} `json:"day"`
		Budgets *spend.Limits `json:"budgets"`
	} `json:"keys"`
}

func readUsage(t *testing.T, ctx context.Context, base, key string) usageReport {
	t.Helper()
	resp := send(t, ctx, "GET", base+"/v1/relay/usage", nil, key, nil)
	var u usageReport
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET /v1/relay/usage: %d %s", resp.StatusCode, b)
	}
	must(t, json.NewDecoder(resp.Body).Decode(&u))
	return u
}

// completion is what the test reads of a chat.completion.
type completion struct {
	Model string `json:"model"`
	Usage struct {
		TotalTokens int64 `json:"total_tokens"`
	} `json:"usage"`
}

// A key with a small daily token budget is served until its usage, which
// the worker counts from each stream's end, reaches the budget; then its
// new generations get 429 insufficient_quota, naming the budget and its
// reset, with Retry-After until the end of the UTC day. Another tenant is
// served as before, and GET /v1/relay/usage shows each tenant its own
// usage, exactly the sum of its answers' usage, and never the other's.
// Every role runs as the shipped NATS configuration allows it.
func TestSpendBudgetRefusesOnlyItsTenant(t *testing.T) {
	const budget = 40
	sys := start(t, options{Edges: 2, Secured: true, Mock: mockupstream.Config{Tokens: 8}, Tune: withTenants(func(c *config.Config) {
		c.Edge.APIKeys[0].Budget = spend.Limits{DailyTokens: budget}
		c.Edge.Spend.Tenants = []edge.TenantSpend{{Tenant: "acme", Limits: spend.Limits{MonthlyTokens: 1 << 30}}}
	})})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	msgs, _ := prompt("How much may I spend?", 8)
	body := chatBody(t, msgs, false)

	var served int64
	var refused *http.Response
	deadline := time.Now().Add(30 * time.Second)
	for refused == nil && time.Now().Before(deadline) {
		// Alternate the edges: each counts from the ledger, not from what
		// it served itself.
		resp := send(t, ctx, "POST", sys.Edges[int(served)%2]+"/v1/chat/completions", body, keyAcme, nil)
		if resp.StatusCode != http.StatusOK {
			refused = resp
			break
		}
		var c completion
		must(t, json.NewDecoder(resp.Body).Decode(&c))
		if c.Usage.TotalTokens == 0 {
			t.Fatal("an answer reported no usage")
		}
		served += c.Usage.TotalTokens
		// Until the ledger holds the answer's record, its hold counts in
		// its place, and takes up the budget's rest (a 429 to retry).
		next := sys.Edges[int(served)%2]
		waitFor(t, 10*time.Second, "the ledger to count the answer", func() bool {
			return readUsage(t, ctx, next, keyAcme).Day.Tokens == served
		})
	}
	if refused == nil {
		t.Fatalf("acme was served %d tokens with a daily budget of %d and never refused", served, budget)
	}
	if served < budget {
		t.Errorf("acme was refused after %d tokens, under its budget of %d", served, budget)
	}
	retry, _ := strconv.Atoi(refused.Header.Get("Retry-After"))
	now := time.Now().UTC()
	untilReset := int(spend.DayEnd(now).Sub(now) / time.Second)
	status, code, raw := errorOf(t, refused)
	if status != http.StatusTooManyRequests || code != edge.CodeInsufficientQuota || !strings.Contains(raw, `"type":"insufficient_quota"`) {
		t.Errorf("refusal: %d %s", status, raw)
	}
	if !strings.Contains(raw, "daily token budget") || !strings.Contains(raw, spend.DayEnd(now).Format(time.RFC3339)) {
		t.Errorf("the refusal does not say which budget and when it resets: %s", raw)
	}
	if retry < untilReset-5 || retry > untilReset+5 {
		t.Errorf("Retry-After %q, want about %d s (the end of the UTC day)", refused.Header.Get("Retry-After"), untilReset)
	}

	// beta is not affected.
	betaBody := []byte(strings.Replace(string(body), `"mock-1"`, `"mock-2"`, 1))
	resp := send(t, ctx, "POST", sys.Edges[1]+"/v1/chat/completions", betaBody, keyBeta, nil)
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("beta was refused: %d %s", resp.StatusCode, b)
	}
	var betaAnswer completion
	must(t, json.NewDecoder(resp.Body).Decode(&betaAnswer))

	acmeKey, betaKey := spend.KeyID(sha256Hex(keyAcme)), spend.KeyID(sha256Hex(keyBeta))
	var acme, beta usageReport
	waitFor(t, 10*time.Second, "the usage of both tenants", func() bool {
		acme, beta = readUsage(t, ctx, sys.Edges[0], keyAcme), readUsage(t, ctx, sys.Edges[1], keyBeta)
		return acme.Day.Tokens == served && beta.Day.Tokens == betaAnswer.Usage.TotalTokens
	})
	if acme.Tenant != "acme" || acme.Month.Tokens != served || acme.Budgets == nil || acme.Budgets.MonthlyTokens != 1<<30 {
		t.Errorf("acme's usage: %+v", acme)
	}
	if !acme.Day.ResetsAt.Equal(spend.DayEnd(now)) {
		t.Errorf("acme's day resets at %v, want %v", acme.Day.ResetsAt, spend.DayEnd(now))
	}
	if len(acme.Keys) != 1 || acme.Keys[0].Key != acmeKey || acme.Keys[0].Day.Tokens != served ||
		acme.Keys[0].Budgets == nil || acme.Keys[0].Budgets.DailyTokens != budget {
		t.Errorf("acme's keys: %+v", acme.Keys)
	}
	if beta.Tenant != "beta" || beta.Budgets != nil || len(beta.Keys) != 1 || beta.Keys[0].Key != betaKey {
		t.Errorf("beta's usage shows more than its own: %+v", beta)
	}
}

// A tenant past its soft budget has its generations for mock-1 sent to
// mock-2, its downgrade, and the answer's model says so; a model without
// a downgrade is served as asked.
func TestSpendSoftLimitDowngrades(t *testing.T) {
	sys := start(t, options{Mock: mockupstream.Config{Tokens: 4}, Tune: withTenants(func(c *config.Config) {
		c.Edge.Spend.Tenants = []edge.TenantSpend{{Tenant: "acme", Soft: spend.Limits{DailyTokens: 1},
			Downgrade: []edge.Downgrade{{From: "mock-1", To: "mock-2"}}}}
	})})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	msgs, _ := prompt("Which model answers?", 4)
	ask := func() completion {
		resp := send(t, ctx, "POST", sys.Edge+"/v1/chat/completions", chatBody(t, msgs, false), keyAcme, nil)
		if resp.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(resp.Body)
			t.Fatalf("%d %s", resp.StatusCode, b)
		}
		var c completion
		must(t, json.NewDecoder(resp.Body).Decode(&c))
		return c
	}
	if c := ask(); c.Model != "mock-1" {
		t.Fatalf("under its soft budget acme was answered by %s", c.Model)
	}
	waitFor(t, 10*time.Second, "the first answer's usage", func() bool {
		return readUsage(t, ctx, sys.Edge, keyAcme).Day.Tokens > 0
	})
	if c := ask(); c.Model != "mock-2" {
		t.Errorf("past its soft budget acme was answered by %s, want mock-2", c.Model)
	}
	// beta has no budgets: never downgraded.
	resp := send(t, ctx, "POST", sys.Edge+"/v1/chat/completions",
		[]byte(strings.Replace(string(chatBody(t, msgs, false)), `"mock-1"`, `"mock-2"`, 1)), keyBeta, nil)
	if resp.StatusCode != http.StatusOK {
		t.Errorf("beta: %d", resp.StatusCode)
	}
}
