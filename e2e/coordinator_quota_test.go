package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relaydev/relay/relay/config"
	"github.com/relaydev/relay/relay/fleet/quota"
	"github.com/relaydev/relay/relay/mockupstream"
)

// quotaLoad runs n clients, each sending requests back to back to the
// edges in turn, for d, and returns every answer with when it was asked
// for and when it came.
type quotaAnswer struct {
	sent, at   time.Time
	status     int
	retryAfter string
	tokens     int
}

func (c *system) quotaLoad(n int, d time.Duration, topic string) []quotaAnswer {
	var mu sync.Mutex
	var out []quotaAnswer
	var seq atomic.Int64
	var wg sync.WaitGroup
	end := time.Now().Add(d)
	for range n {
		wg.Go(func() {
			for time.Now().Before(end) {
				i := seq.Add(1)
				edge := c.Edges[int(i)%len(c.Edges)]
				sent := time.Now()
				status, ra, body, err := unary(context.Background(), edge, "mock-1", fmt.Sprintf("%s %d.", topic, i))
				if err != nil {
					c.t.Error(err)
					return
				}
				mu.Lock()
				out = append(out, quotaAnswer{sent: sent, at: time.Now(), status: status, retryAfter: ra, tokens: usageOf(body).TotalTokens})
				mu.Unlock()
				if status != http.StatusOK {
					time.Sleep(20 * time.Millisecond)
				}
			}
		})
	}
	wg.Wait()
	return out
}

// Three workers share a provider's 120 requests per minute. Twelve clients
// ask for far more; over the last 6s of 8, after the shares settled, the
// provider gets 2 calls a second within 25%, plus one request of burst per
// worker.
func TestCoordinatorProviderRPMShared(t *testing.T) {
	const rpm = 120
	c := start(t, options{Fleet: true, Workers: 3, Coordinator: true, Mock: mockupstream.Config{Tokens: 5, TokenInterval: -1}, Tune: func(cfg *config.Config) {
		cfg.Providers[0].RateLimit = quota.Limit{RPM: rpm, MaxWait: 500 * time.Millisecond}
	}})
	start := time.Now()
	answers := c.quotaLoad(12, 8*time.Second, "RPM")
	from, to := start.Add(2*time.Second), start.Add(8*time.Second)
	calls := len(c.fronts["mock"].chats(from, to))
	want := rpm / 60.0 * to.Sub(from).Seconds()
	statuses := map[int]int{}
	for _, a := range answers {
		statuses[a.status]++
	}
	t.Logf("%d calls in %v, want %.0f at %d rpm; client statuses %v", calls, to.Sub(from), want, rpm, statuses)
	if float64(calls) > 1.25*want+3 || float64(calls) < 0.6*want {
		t.Fatalf("%d calls in %v: not %.0f within 25%% (+3 of burst)", calls, to.Sub(from), want)
	}
	if statuses[http.StatusServiceUnavailable] == 0 {
		t.Fatal("no request was refused: the limit was never reached")
	}
	for _, g := range c.gates {
		if g.Stats().Calls["mock/mock-1"].Calls == 0 {
			t.Fatal("a worker made no call: its share never grew")
		}
	}
}

// Three workers share 600 tokens per minute. A call is let through while
// the worker's share has tokens left and pays its usage at the end, so the
// overshoot is bounded by the calls in flight: within 30%, plus one call
// per worker.
func TestCoordinatorProviderTPMShared(t *testing.T) {
	const tpm = 600
	c := start(t, options{Fleet: true, Workers: 3, Coordinator: true, Mock: mockupstream.Config{Tokens: 5, TokenInterval: -1}, Tune: func(cfg *config.Config) {
		cfg.Providers[0].RateLimit = quota.Limit{TPM: tpm, MaxWait: 500 * time.Millisecond}
	}})
	start := time.Now()
	answers := c.quotaLoad(9, 9*time.Second, "TPM")
	from, to := start.Add(2*time.Second), start.Add(9*time.Second)
	tokens, perCall := 0, 0
	for _, a := range answers {
		if a.status == http.StatusOK && !a.at.Before(from) && a.at.Before(to) {
			tokens += a.tokens
			perCall = max(perCall, a.tokens)
		}
	}
	want := tpm / 60.0 * to.Sub(from).Seconds()
	t.Logf("%d tokens in %v (calls of up to %d), want %.0f at %d tpm", tokens, to.Sub(from), perCall, want, tpm)
	if float64(tokens) > 1.3*want+float64(3*perCall) || float64(tokens) < 0.6*want {
		t.Fatalf("%d tokens in %v: not %.0f within 30%% (+%d in flight)", tokens, to.Sub(from), want, 3*perCall)
	}
}

// The per-tenant limit at the edge is shared by every edge: 60 requests
// per minute over two edges let about one request a second through; the
// rest get a 429 with Retry-After.
func TestCoordinatorTenantRPMSharedByEdges(t *testing.T) {
	const rpm = 60
	c := start(t, options{Fleet: true, Workers: 1, Edges: 2, Coordinator: true, Mock: mockupstream.Config{Tokens: 5, TokenInterval: -1}, Tune: func(cfg *config.Config) {
		cfg.Coordinator.TenantRPM = rpm
	}})
	// The edges learn the limit with their first share.
	_, _, _, _ = unary(context.Background(), c.Edges[0], "mock-1", "Warm up 0.")
	_, _, _, _ = unary(context.Background(), c.Edges[1], "mock-1", "Warm up 1.")
	time.Sleep(500 * time.Millisecond)
	start := time.Now()
	answers := c.quotaLoad(6, 7*time.Second, "Tenant")
	from, to := start.Add(time.Second), start.Add(7*time.Second)
	// The edge decides as a request arrives: count the requests sent in
	// the window, not the answers, which a loaded machine delays unevenly.
	ok, limited := 0, 0
	for _, a := range answers {
		if a.sent.Before(from) || !a.sent.Before(to) {
			continue
		}
		switch a.status {
		case http.StatusOK:
			ok++
		case http.StatusTooManyRequests:
			limited++
			if ra, _ := strconv.Atoi(a.retryAfter); ra < 1 {
				t.Fatalf("429 with Retry-After %q", a.retryAfter)
			}
		}
	}
	want := rpm / 60.0 * to.Sub(from).Seconds()
	t.Logf("%d answered and %d limited in %v, want %.0f answered at %d rpm over 2 edges", ok, limited, to.Sub(from), want, rpm)
	if float64(ok) > 1.25*want+2 || float64(ok) < 0.6*want || limited == 0 {
		t.Fatalf("%d answered, %d limited: not %.0f within 25%% (+2 of burst)", ok, limited, want)
	}
}
