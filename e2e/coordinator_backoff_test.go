package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/relaydev/relay/relay/backoff"
	"github.com/relaydev/relay/relay/config"
	"github.com/relaydev/relay/relay/fleet"
	"github.com/relaydev/relay/relay/fleet/breaker"
	"github.com/relaydev/relay/relay/fleet/quota"
	"github.com/relaydev/relay/relay/mockupstream"
	"github.com/relaydev/relay/relay/relaytest"
	"github.com/relaydev/relay/relay/wire"
)

// One worker gets a 429 with Retry-After: 4; the pause is shared, so none
// of the three workers calls the provider until it ends. New requests
// meanwhile wait for it and complete after it, as the request that got the
// 429 does; those that ask to fail fast get a fast 503 with Retry-After,
// from each of the three workers.
func TestCoordinator429PausesEveryWorker(t *testing.T) {
	const grace = 300 * time.Millisecond // calls admitted before a worker learned of the pause may still arrive
	c := start(t, options{Fleet: true, Workers: 3, Mock: mockupstream.Config{Tokens: 5}, Tune: func(cfg *config.Config) {
		// Few slots per worker, so the queue hands the requests to all three.
		cfg.Worker.MaxInflight = 4
	}})
	front := c.fronts["mock"]
	var once sync.Once
	fail := func(_ int, call upstreamCall) (int, string) {
		status := 0
		if call.conv == "Rate limited." {
			once.Do(func() { status = http.StatusTooManyRequests })
		}
		return status, "4"
	}
	front.fail.Store(&fail)
	pauses := fleet.NewTable[wire.Pause](c.kv(wire.PauseBucket), nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go pauses.Run(ctx)

	first := make(chan time.Time, 1)
	go func() {
		status, _, body, err := unary(context.Background(), c.Edge, "mock-1", "Rate limited.")
		if err != nil || status != http.StatusOK {
			t.Errorf("the request that got the 429: %d %s %v", status, body, err)
		}
		first <- time.Now()
	}()
	var pause wire.Pause
	relaytest.Eventually(t, 10*time.Second, 5*time.Millisecond, func() bool {
		row, ok := pauses.Get(mockOne)
		pause = row.Value
		return ok
	})
	if d := pause.Until.Sub(pause.At); d < 3900*time.Millisecond || d > 4100*time.Millisecond {
		t.Fatalf("pause of %v, want the provider's 4s", d)
	}
	// From the moment every worker's copy holds the pause (and the calls
	// admitted before have left), none may call the provider.
	relaytest.Eventually(t, 2*time.Second, time.Millisecond, func() bool {
		for _, g := range c.gates {
			if p, ok := g.Pause(mockOne); !ok || !p.Until.Equal(pause.Until) {
				return false
			}
		}
		return true
	})
	learned := time.Now()

	// Waves of ten new requests that fail fast while the pause lasts, and
	// beside the first waves, requests that wait.
	const waiting = 10
	waited := make(chan time.Time, waiting)
	var waiters sync.WaitGroup
	failFast := http.Header{"X-Relay-Fail-Fast": {"true"}}
	var mu sync.Mutex
	refused := 0
	for wave := 0; time.Until(pause.Until) > time.Second; wave++ {
		if wave < waiting {
			waiters.Go(func() {
				status, _, body, err := unary(context.Background(), c.Edge, "mock-1", fmt.Sprintf("Waits %d.", wave))
				if err != nil || status != http.StatusOK {
					t.Errorf("a request that waited for the pause: %d %s %v", status, body, err)
				}
				waited <- time.Now()
			})
		}
		var wg sync.WaitGroup
		for i := range 10 {
			wg.Go(func() {
				status, retryAfter, _, err := unaryWith(context.Background(), c.Edge, "mock-1", fmt.Sprintf("While paused %d-%d.", wave, i), failFast)
				if err != nil {
					t.Error(err)
					return
				}
				done := time.Now()
				if done.After(pause.Until) {
					return
				}
				ra, _ := strconv.Atoi(retryAfter)
				if status != http.StatusServiceUnavailable || ra < 1 || ra > 4 {
					t.Errorf("during the pause: %d with Retry-After %q, want a fast 503 with the pause's", status, retryAfter)
				}
				mu.Lock()
				refused++
				mu.Unlock()
			})
		}
		wg.Wait()
	}
	done := <-first
	waiters.Wait()
	close(waited)
	answered := 0
	for at := range waited {
		if at.Before(pause.Until) {
			t.Fatalf("a request that waited was answered %v before the pause ended", pause.Until.Sub(at))
		}
		answered++
	}

	if calls := front.chats(learned.Add(grace), pause.Until); len(calls) != 0 {
		t.Fatalf("%d calls reached the provider during the pause: %+v", len(calls), calls)
	}
	if refused < 10 {
		t.Fatalf("only %d requests were answered during the pause", refused)
	}
	var byWorker []int
	for i, g := range c.gates {
		n := g.Stats().Refused["paused"]
		if n == 0 {
			t.Fatalf("worker %d refused nothing during the pause: it did not learn of it", i+1)
		}
		byWorker = append(byWorker, n)
	}
	if done.Before(pause.Until) {
		t.Fatalf("the 429'd request finished %v before the pause ended", pause.Until.Sub(done))
	}
	status, _, body, err := unary(context.Background(), c.Edge, "mock-1", "After the pause.")
	if err != nil || status != http.StatusOK {
		t.Fatalf("after the pause: %d %s %v", status, body, err)
	}
	t.Logf("paused %v by %s; %d fast 503s; refusals by worker %v; %d requests waited and were answered", pause.Until.Sub(pause.At), pause.By, refused, byWorker, answered)
}

// During a partial outage (every other call fails) the retries stay within
// the budget: 20% of the requests, plus one per worker (min_retries), over
// the budget's window. Without a budget this load makes about one retry per
// request.
//
// The budget bounds retries within its sliding window, not over a run
// that outlasts it (each further window allows its own share again), so
// the window is made longer than the run may take on a loaded machine,
// and the budgets' own window counts, as each worker reports them after
// the run, must still hold every request and retry they admitted.
func TestCoordinatorRetryBudgetCapsRetries(t *testing.T) {
	const requests = 150
	budgetCfg := quota.BudgetConfig{Ratio: 0.2, MinRetries: 1, Window: 2 * time.Minute}
	c := start(t, options{Fleet: true, Workers: 3, Mock: mockupstream.Config{Tokens: 5}, Tune: func(cfg *config.Config) {
		p := &cfg.Providers[0]
		p.Retry = backoff.Config{Base: 5 * time.Millisecond, Cap: 10 * time.Millisecond, MaxRetries: 6}
		p.Breaker = breaker.Config{Failures: -1} // this test is about the budget
		p.RetryBudget = budgetCfg
	}})
	front := c.fronts["mock"]
	fail := func(n int, _ upstreamCall) (int, string) {
		if n%2 == 0 {
			return http.StatusServiceUnavailable, ""
		}
		return 0, ""
	}
	front.fail.Store(&fail)

	start := time.Now()
	var mu sync.Mutex
	statuses := map[int]int{}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 15)
	for i := range requests {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			status, _, _, err := unary(context.Background(), c.Edge, "mock-1", fmt.Sprintf("Partial outage %d.", i))
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			statuses[status]++
			mu.Unlock()
		})
	}
	wg.Wait()
	end := time.Now()
	took := end.Sub(start)

	calls := front.allChats()
	convs := map[string]int{}
	for _, call := range calls {
		convs[call.conv]++
	}
	// What the provider saw: every call of a conversation after its first
	// is a retry. What the budgets counted: a request handed over to
	// another worker (its first worker taken for dead on a loaded
	// machine) starts again there as a request, so the provider sees one
	// retry more per handover than the budgets do.
	retries := len(calls) - len(convs)
	budget := int(budgetCfg.Ratio*requests) + len(c.gates)*budgetCfg.MinRetries
	inWindow := budgetWindows(t, c, end)
	denied, admitted := 0, 0
	var perWorker []string
	for i, g := range c.gates {
		r, w := g.Stats().Retries[mockOne], inWindow[i]
		denied += r.Denied
		admitted += r.Requests
		perWorker = append(perWorker, fmt.Sprintf("w%d %d/%d", i+1, r.Retries, r.Requests))
		if w.Requests != r.Requests || w.Retries != r.Retries {
			t.Fatalf("worker %d: its budget's window holds %d requests and %d retries of the %d and %d it admitted: the run outlasted the window", i+1, w.Requests, w.Retries, r.Requests, r.Retries)
		}
		if float64(r.Retries) > budgetCfg.Ratio*float64(r.Requests)+float64(budgetCfg.MinRetries) {
			t.Errorf("worker %d admitted %d retries for %d requests in its budget's window: over its budget", i+1, r.Retries, r.Requests)
		}
	}
	handovers := admitted - requests
	t.Logf("%d requests in %v: %d calls, %d retries (budget %d), %d retries denied, %d handovers; retries/requests by worker %v; client statuses %v",
		len(convs), took.Round(time.Millisecond), len(calls), retries, budget, denied, handovers, perWorker, statuses)
	switch {
	case len(convs) != requests || handovers < 0:
		t.Fatalf("%d conversations reached the provider and the budgets counted %d requests, want %d", len(convs), admitted, requests)
	case retries > budget+handovers:
		t.Fatalf("%d retries, over the budget of %d (+%d handovers)", retries, budget, handovers)
	case retries < budget/2 || denied == 0:
		t.Fatalf("%d retries, %d denied: the budget was not used", retries, denied)
	case statuses[http.StatusOK] < requests/2:
		t.Fatalf("statuses %v: the calls that work should have answered", statuses)
	}
}

// budgetWindows returns, by worker, the requests and retries its budget
// for the mock provider holds in its window, as the worker's first quota
// report written after since counts them.
func budgetWindows(t *testing.T, c *system, since time.Time) []quota.Retries {
	t.Helper()
	kv := c.kv(wire.QuotaBucket)
	out := make([]quota.Retries, len(c.gates))
	for i := range c.gates {
		key := fleet.DemandKey("worker", fmt.Sprintf("w%d", i+1))
		relaytest.Eventually(t, 10*time.Second, 10*time.Millisecond, func() bool {
			e, err := kv.Get(context.Background(), key)
			if err != nil {
				return false
			}
			var r quota.Report
			if err := json.Unmarshal(e.Value(), &r); err != nil || !r.At.After(since) {
				return false
			}
			out[i] = r.Retries[mockOne]
			return true
		})
	}
	return out
}
