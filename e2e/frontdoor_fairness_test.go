package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relaydev/relay/edge"
	"github.com/relaydev/relay/relay/config"
	"github.com/relaydev/relay/relay/fleet"
	"github.com/relaydev/relay/relay/fleet/quota"
	"github.com/relaydev/relay/relay/mockupstream"
)

// fairStartBound is the stated bound on how long a tenant's first token
// waits when another tenant has a backlog: the reserve slot is free, so
// it is the time the request takes on an idle system, with room for a
// loaded test machine.
const fairStartBound = 2 * time.Second

// Tenant acme queues 100 slow requests on a worker of 4 slots; tenant
// beta's request then starts within fairStartBound, where a first-come
// queue would hold it until 25 of acme's answers ended. Acme's backlog
// waits at the edge: it never reaches the work queue.
func TestFairTenantsBacklogDoesNotDelayAnother(t *testing.T) {
	sys := start(t, options{
		// Each answer takes about 3s.
		Mock: mockupstream.Config{Tokens: 60, TokenInterval: 50 * time.Millisecond},
		Tune: withTenants(func(c *config.Config) { c.Worker.MaxInflight = 4 }),
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	body := func(text string) string {
		return `{"model":"mock-2","stream":true,"messages":[{"role":"user","content":"` + text + `"}]}`
	}
	// One answer first: the edge has heard the worker's heartbeats since
	// it started, and knows its slots.
	warm := send(t, ctx, "POST", sys.Edges[0]+"/v1/chat/completions", []byte(body("warm")), keyBeta, nil)
	if tr := transcriptOf(t, warm, nil, 0); tr.status != "done" && tr.finish != "stop" {
		t.Fatalf("the first answer ended status %q", tr.status)
	}
	// Acme's backlog: its clients wait for their answers until the test
	// ends.
	backlog, stopBacklog := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { stopBacklog(); wg.Wait() }()
	for i := range 100 {
		wg.Go(func() {
			req, _ := http.NewRequestWithContext(backlog, "POST", sys.Edges[0]+"/v1/chat/completions", strings.NewReader(body("acme "+string(rune('a'+i%26)))))
			req.Header.Set("Authorization", "Bearer "+keyAcme)
			req.Header.Set("Content-Type", "application/json")
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		})
	}
	waitFor(t, 20*time.Second, "acme's generations to fill the usable slots", func() bool {
		return sys.Mock.Stats().ChatRequests >= 4
	})

	began := time.Now()
	resp := send(t, ctx, "POST", sys.Edges[0]+"/v1/chat/completions", []byte(body("beta")), keyBeta, nil)
	tr := transcriptOf(t, resp, nil, 2)
	if waited := time.Since(began); waited > fairStartBound {
		t.Errorf("beta's first token came after %v, over the bound of %v", waited, fairStartBound)
	}
	transcriptOf(t, resp, tr, 0)
	if tr.status != "done" && tr.finish != "stop" {
		t.Errorf("beta's answer ended status %q, finish %q", tr.status, tr.finish)
	}
	if n := requestsQueued(t, sys); n >= 21 {
		t.Errorf("%d requests reached the work queue: acme's backlog did not wait at the edge", n)
	}
}

// tenantLimitsKnown waits until the coordinator published tenant's limits
// (the tenant's view of /v1/relay/status shows them), then lets one
// request of key run to its end: meanwhile the edge read the record
// (once a quota interval) and heard the workers' heartbeats.
func tenantLimitsKnown(t *testing.T, ctx context.Context, sys *system, key string, published func(quota.Limits) bool) {
	t.Helper()
	waitFor(t, 20*time.Second, "the coordinator to publish the tenant limits", func() bool {
		resp := send(t, ctx, "GET", sys.Edges[0]+"/v1/relay/status", nil, key, nil)
		defer resp.Body.Close()
		var st fleet.Status
		return resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(&st) == nil &&
			st.Quotas.Tenants != nil && published(*st.Quotas.Tenants)
	})
	resp := send(t, ctx, "POST", sys.Edges[0]+"/v1/chat/completions", []byte(`{"model":"mock-2","stream":true,"messages":[{"role":"user","content":"warm"}]}`), key, nil)
	if tr := transcriptOf(t, resp, nil, 0); tr.status != "done" && tr.finish != "stop" {
		t.Fatalf("the first answer ended status %q", tr.status)
	}
}

// coordinator.tenant_concurrency caps acme at 2 generations at once: of 4
// sent together, the last two start only as the first two end, while
// beta, with no cap, is served beside them.
func TestTenantConcurrencyCap(t *testing.T) {
	sys := start(t, options{
		Coordinator: true,
		// Each answer takes about 3s.
		Mock: mockupstream.Config{Tokens: 60, TokenInterval: 50 * time.Millisecond},
		Tune: withTenants(func(c *config.Config) {
			c.Worker.MaxInflight = 8
			c.Coordinator.TenantConcurrency = map[string]int{"acme": 2}
		}),
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	tenantLimitsKnown(t, ctx, sys, keyAcme, func(l quota.Limits) bool { return l.MaxConcurrent == 2 })

	type span struct{ first, end time.Time }
	spans := make([]span, 4)
	var wg sync.WaitGroup
	for i := range spans {
		wg.Go(func() {
			resp := send(t, ctx, "POST", sys.Edges[0]+"/v1/chat/completions", []byte(`{"model":"mock-2","stream":true,"messages":[{"role":"user","content":"capped `+string(rune('a'+i))+`"}]}`), keyAcme, nil)
			s := sseOf(resp)
			tr := &transcript{}
			if err := tr.readUntil(s, 1); err != nil {
				t.Error(err)
				return
			}
			spans[i].first = time.Now()
			if err := tr.readUntil(s, 0); err != nil {
				t.Error(err)
			}
			spans[i].end = time.Now()
		})
	}
	waitFor(t, 20*time.Second, "two of acme's answers to start", func() bool { return sys.Mock.Stats().ChatRequests >= 3 })
	resp := send(t, ctx, "POST", sys.Edges[0]+"/v1/chat/completions", []byte(`{"model":"mock-2","stream":true,"messages":[{"role":"user","content":"beta beside"}]}`), keyBeta, nil)
	if tr := transcriptOf(t, resp, nil, 0); tr.status != "done" && tr.finish != "stop" {
		t.Errorf("beta's answer ended status %q", tr.status)
	}
	wg.Wait()
	// At each answer's first token, at most 2 of acme's ran (itself
	// included): the others had not started or had ended.
	for i, s := range spans {
		running := 0
		for _, o := range spans {
			if !o.first.After(s.first) && o.end.After(s.first) {
				running++
			}
		}
		if running > 2 {
			t.Errorf("answer %d started while %d of acme's ran: %+v", i, running, spans)
		}
	}
}

// coordinator.tenant_tpm_limits: acme's requests are refused with a 429
// (type "tokens", Retry-After) once its answers used its tokens per
// minute; beta is served meanwhile.
func TestTenantTokensPerMinute(t *testing.T) {
	sys := start(t, options{
		Coordinator: true,
		Mock:        mockupstream.Config{Tokens: 60, TokenInterval: -1},
		Tune: withTenants(func(c *config.Config) {
			c.Coordinator.TenantTPMLimits = map[string]int{"acme": 200}
		}),
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	tenantLimitsKnown(t, ctx, sys, keyAcme, func(l quota.Limits) bool { return l.TenantTPM == 200 })
	body := []byte(`{"model":"mock-2","stream":true,"messages":[{"role":"user","content":"count my tokens"}]}`)
	served := 0
	for {
		resp := send(t, ctx, "POST", sys.Edges[0]+"/v1/chat/completions", body, keyAcme, nil)
		if resp.StatusCode == http.StatusOK {
			transcriptOf(t, resp, nil, 0)
			if served++; served > 20 {
				t.Fatalf("%d answers of 65 tokens served under a limit of 200 tokens a minute", served)
			}
			continue
		}
		retry := resp.Header.Get("Retry-After")
		status, code, raw := errorOf(t, resp)
		if status != http.StatusTooManyRequests || code != edge.CodeRateLimited || !strings.Contains(raw, `"type":"tokens"`) {
			t.Fatalf("refusal: %d %s", status, raw)
		}
		if n, _ := strconv.Atoi(retry); n < 1 {
			t.Errorf("429 with Retry-After %q", retry)
		}
		break
	}
	resp := send(t, ctx, "POST", sys.Edges[0]+"/v1/chat/completions", body, keyBeta, nil)
	if tr := transcriptOf(t, resp, nil, 0); tr.status != "done" && tr.finish != "stop" {
		t.Errorf("beta's answer ended status %q", tr.status)
	}
}
