package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/relay/fleet/breaker"
	"github.com/relaydev/relay/relay/fleet/canary"
	"github.com/relaydev/relay/relay/fleet/quota"
	"github.com/relaydev/relay/relay/provider"
	"github.com/relaydev/relay/relay/relaytest"
	"github.com/relaydev/relay/relay/streams"
	"github.com/relaydev/relay/relay/upstream"
	"github.com/relaydev/relay/relay/wire"
)

// sharedGate starts a gate over a fresh NATS, with one provider "p".
func sharedGate(t *testing.T, p provider.Config, models ...provider.Model) (*SharedGate, jetstream.JetStream) {
	t.Helper()
	_, js := relaytest.Connect(t, relaytest.NATS(t), streams.Topology{})
	p.Name, p.BaseURL = "p", "http://127.0.0.1:1/v1"
	if len(p.Models) == 0 {
		p.Models = []string{"m"}
	}
	catalog, err := provider.NewCatalog([]provider.Config{p}, models...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	g, err := NewSharedGate(ctx, SharedGateConfig{ID: "w1", QuotaInterval: 50 * time.Millisecond}, SharedGateDeps{JS: js, Catalog: catalog, Logger: relaytest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	go g.Run(ctx)
	<-g.Synced()
	return g, js
}

// pm is the scope of model m on provider p, which most tests call: its
// breaker, pause and retry budget.
var pm = wire.ScopeKey("p", "m")

func putState(t *testing.T, js jetstream.JetStream, bucket, key string, v any) {
	t.Helper()
	kv, err := js.KeyValue(context.Background(), bucket)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := json.Marshal(v)
	if _, err := kv.Put(context.Background(), key, data); err != nil {
		t.Fatal(err)
	}
}

// The breaker trips on an outage; then a call that asked to fail fast, one
// that could not outwait the bound (the probe comes after max_wait), and
// one with another candidate are refused at once, with a Retry-After.
func TestSharedGateTripsAndRefusesNewRequests(t *testing.T) {
	g, _ := sharedGate(t, provider.Config{Breaker: breaker.Config{Cooldown: 2 * time.Minute}})
	ctx := context.Background()
	fail := Report{Verdict: breaker.Failure, Class: upstream.Transient, Err: errors.New("connection refused")}
	for range breaker.DefaultFailures {
		tk, err := g.Admit(ctx, "p", "m")
		if err != nil {
			t.Fatal(err)
		}
		tk.Done(fail)
	}
	if b := g.Breaker(pm); b.Current() != breaker.Open || b.By != "w1" {
		t.Fatalf("breaker %+v after %d failures", b, breaker.DefaultFailures)
	}
	start := time.Now()
	_, err := g.Admit(WithCallInfo(ctx, CallInfo{FailFast: true}), "p", "m")
	var ue *UnavailableError
	if !errors.Is(err, ErrProviderUnavailable) || !errors.Is(err, ErrProviderOpen) || !errors.As(err, &ue) || ue.RetryAfter < 50*time.Second || ue.Provider != "p" {
		t.Fatalf("admit while open: %v", err)
	}
	if time.Since(start) > 5*time.Second {
		t.Fatal("a request that asked to fail fast waited")
	}
	if got := RetryAfterOf(err); got != ue.RetryAfter {
		t.Fatalf("retry after %v", got)
	}
	// The probe comes after the bound (breaker.DefaultMaxWait): waiting
	// would only delay the failure.
	start = time.Now()
	if _, err := g.Admit(ctx, "p", "m"); !errors.Is(err, ErrProviderOpen) || time.Since(start) > 5*time.Second {
		t.Fatalf("a request that cannot outwait the cooldown: %v after %v", err, time.Since(start))
	}
	// A request with an alternative moves on at once too.
	if _, err := g.Admit(WithCallInfo(ctx, CallInfo{Retry: true, Alternatives: 1}), "p", "m"); !errors.Is(err, ErrProviderOpen) {
		t.Fatalf("with an alternative: %v", err)
	}
	if s := g.Stats(); s.Transitions["closed->open"] != 1 || s.Refused["open"] != 3 || s.Calls["p/m"].Open != 3 || s.Calls["p/m"].Failures != breaker.DefaultFailures {
		t.Fatalf("stats %+v", s)
	}
}

// Weather against a real NATS: over 200 calls, 5% are cut and 5% stall
// after they streamed content, 3% get a 429, and a few fail before any
// content, never more than two in a row. The default breaker stays closed.
// Then the provider refuses every connection: the breaker opens after
// breaker.DefaultFailures failures, and the calls that follow are refused
// without reaching it, but for the one probe once the cooldown is over.
func TestSharedGateOpensOnAnOutageNotOnWeather(t *testing.T) {
	g, _ := sharedGate(t, provider.Config{Breaker: breaker.Config{Cooldown: 300 * time.Millisecond}})
	ctx := context.Background()
	fast := WithCallInfo(ctx, CallInfo{FailFast: true})
	cut := Report{Verdict: breaker.Failure, Class: upstream.Transient, Err: upstream.ErrTruncated, Streamed: true}
	stall := Report{Verdict: breaker.Failure, Class: upstream.Transient, Err: errors.New("stalled"), Streamed: true}
	busy := Report{Verdict: breaker.Failure, Class: upstream.Transient, Err: &upstream.StatusError{Status: 429}}
	early := Report{Verdict: breaker.Failure, Class: upstream.Transient, Err: errors.New("first byte timeout")}
	ok := Report{Verdict: breaker.Success}
	for i := range 200 {
		r := ok
		switch i % 100 {
		case 3, 23, 43, 63, 83:
			r = cut
		case 13, 33, 53, 73, 93:
			r = stall
		case 9, 49, 89:
			r = busy
		case 14, 15, 60:
			r = early
		}
		tk, err := g.Admit(WithCallInfo(ctx, CallInfo{Retry: i%10 == 4}), "p", "m")
		if err != nil {
			t.Fatalf("call %d refused under weather: %v", i, err)
		}
		tk.Done(r)
	}
	if s := g.Stats(); s.Transitions["closed->open"] != 0 || g.Breaker(pm).Current() != breaker.Closed {
		t.Fatalf("weather moved the breaker: %+v, transitions %v", g.Breaker(pm), s.Transitions)
	}

	refused := Report{Verdict: breaker.Failure, Class: upstream.Transient, Err: errors.New("connection refused")}
	for i := 1; g.Breaker(pm).Current() == breaker.Closed; i++ {
		if i > breaker.DefaultFailures {
			t.Fatalf("still closed after %d refused connections", i-1)
		}
		tk, err := g.Admit(ctx, "p", "m")
		if err != nil {
			t.Fatalf("refused before it opened: %v", err)
		}
		tk.Done(refused)
	}
	if b := g.Breaker(pm); !strings.HasPrefix(b.Reason, fmt.Sprintf("%d failures in a row", breaker.DefaultFailures)) {
		t.Fatalf("opened by %q", b.Reason)
	}
	for range 20 {
		if _, err := g.Admit(fast, "p", "m"); !errors.Is(err, ErrProviderOpen) {
			t.Fatalf("admitted while open: %v", err)
		}
	}
	// Once the cooldown is over, one call is the probe; the others are
	// refused while it runs.
	relaytest.Eventually(t, 2*time.Second, 10*time.Millisecond, func() bool {
		tk, err := g.Admit(fast, "p", "m")
		if err != nil {
			return false
		}
		if _, err := g.Admit(fast, "p", "m"); !errors.Is(err, ErrProviderOpen) {
			t.Fatalf("a second call during the probe: %v", err)
		}
		tk.Done(refused)
		return true
	})
	if s := g.Stats(); s.Transitions["closed->open"] != 1 || s.Transitions["open->half_open"] != 1 || s.Transitions["half_open->open"] != 1 {
		t.Fatalf("transitions %v, want one trip and one failed probe", s.Transitions)
	}
}

// By default each model of the provider has a breaker and a shared pause
// of its own: one model's failures and Retry-After leave the other model
// alone.
func TestSharedGateBreakerIsPerModelByDefault(t *testing.T) {
	g, js := sharedGate(t, provider.Config{Models: []string{"m1", "m2"}, Breaker: breaker.Config{Cooldown: time.Minute}})
	ctx := context.Background()
	for range breaker.DefaultFailures {
		tk, err := g.Admit(ctx, "p", "m1")
		if err != nil {
			t.Fatal(err)
		}
		tk.Done(Report{Verdict: breaker.Failure, Class: upstream.Transient, Err: errors.New("cut")})
	}
	m1, m2 := wire.ScopeKey("p", "m1"), wire.ScopeKey("p", "m2")
	if g.Breaker(m1).Current() != breaker.Open || g.Breaker(m2).Current() != breaker.Closed || g.Breaker("p").Current() != breaker.Closed {
		t.Fatalf("breakers after m1's failures: m1 %s, m2 %s, p %s", g.Breaker(m1).Current(), g.Breaker(m2).Current(), g.Breaker("p").Current())
	}
	fast := WithCallInfo(ctx, CallInfo{FailFast: true})
	if _, err := g.Admit(fast, "p", "m1"); !errors.Is(err, ErrProviderOpen) {
		t.Fatalf("m1 while its breaker is open: %v", err)
	}
	tk, err := g.Admit(ctx, "p", "m2")
	if err != nil {
		t.Fatalf("m2 while m1's breaker is open: %v", err)
	}
	tk.Done(Report{Verdict: breaker.Failure, Class: upstream.Transient, Err: &upstream.StatusError{Status: 429}, RetryAfter: 2 * time.Second})
	if _, err := g.Admit(fast, "p", "m2"); !errors.Is(err, ErrProviderPaused) {
		t.Fatalf("m2 after its 429 with Retry-After: %v", err)
	}
	pauses, err := js.KeyValue(ctx, wire.PauseBucket)
	if err != nil {
		t.Fatal(err)
	}
	keys, _ := pauses.Keys(ctx)
	if len(keys) != 1 || keys[0] != m2 {
		t.Fatalf("pauses %v, want m2's only", keys)
	}
}

// A request waits for the breaker; the probe is claimed by the first call
// after the cooldown, its stream closes the breaker, and the waiting call
// goes within the recovery window after that moment.
func TestSharedGateWaitsThenSpreads(t *testing.T) {
	const jitter = 300 * time.Millisecond
	g, js := sharedGate(t, provider.Config{Breaker: breaker.Config{Cooldown: time.Second, RecoveryJitter: jitter, MaxWait: 5 * time.Second}})
	now := time.Now()
	putState(t, js, wire.BreakerBucket, pm, breaker.State{Phase: breaker.Open, Since: now, Trips: 1, Until: now.Add(300 * time.Millisecond)})
	relaytest.Eventually(t, time.Second, 5*time.Millisecond, func() bool { return g.Breaker(pm).Current() == breaker.Open })

	started := WithCallInfo(context.Background(), CallInfo{Retry: true})
	waited := make(chan time.Time, 1)
	go func() {
		tk, err := g.Admit(started, "p", "m")
		if err != nil {
			t.Error(err)
		}
		at := time.Now()
		// Reported before the test reads the breaker: when this call won
		// the probe, its report is what closes it.
		tk.Done(Report{Verdict: breaker.Success})
		waited <- at
	}()
	time.Sleep(400 * time.Millisecond) // the cooldown is over; the waiter may have claimed the probe
	probe, err := g.Admit(WithCallInfo(context.Background(), CallInfo{FailFast: true}), "p", "m")
	if err == nil {
		// This call won the claim: its stream closes the breaker.
		probe.(StartedTicket).Started()
		probe.Done(Report{Verdict: breaker.Success})
	}
	at := <-waited
	b := g.Breaker(pm)
	if b.Current() != breaker.Closed {
		t.Fatalf("breaker %+v", b)
	}
	if d := at.Sub(b.Since); d > jitter+100*time.Millisecond {
		t.Fatalf("waiting call went %v after the close, past the %v window", d, jitter)
	}
}

func TestSharedGatePauseAndBudget(t *testing.T) {
	g, _ := sharedGate(t, provider.Config{RetryBudget: quota.BudgetConfig{Ratio: 0.5, MinRetries: -1}})
	ctx := context.Background()
	tk, err := g.Admit(ctx, "p", "m")
	if err != nil {
		t.Fatal(err)
	}
	tk.Done(Report{Verdict: breaker.Failure, Class: upstream.Transient, Err: &upstream.StatusError{Status: 429}, RetryAfter: 2 * time.Second})
	if _, err := g.Admit(WithCallInfo(ctx, CallInfo{FailFast: true}), "p", "m"); !errors.Is(err, ErrProviderPaused) {
		t.Fatalf("after a 429 with Retry-After: %v", err)
	}
	if b := g.Breaker(pm); b.Current() != breaker.Closed {
		t.Fatalf("a 429 moved the breaker: %+v", b)
	}

	g2, _ := sharedGate(t, provider.Config{RetryBudget: quota.BudgetConfig{Ratio: 0.5, MinRetries: -1}})
	retry := WithCallInfo(ctx, CallInfo{Retry: true})
	for range 2 {
		tk, err := g2.Admit(ctx, "p", "m")
		if err != nil {
			t.Fatal(err)
		}
		tk.Done(Report{Verdict: breaker.Success})
	}
	tk, err = g2.Admit(retry, "p", "m")
	if err != nil {
		t.Fatalf("first retry of two requests at 50%%: %v", err)
	}
	tk.Done(Report{Verdict: breaker.Success})
	if _, err := g2.Admit(retry, "p", "m"); !errors.Is(err, ErrRetryBudget) {
		t.Fatalf("second retry: %v", err)
	}
	// A call that continues an answer the provider was streaming is not
	// the budget's: it goes, and is not counted.
	tk, err = g2.Admit(WithCallInfo(ctx, CallInfo{Retry: true, AfterContent: true}), "p", "m")
	if err != nil {
		t.Fatalf("continuation of a cut answer with the budget spent: %v", err)
	}
	tk.Done(Report{Verdict: breaker.Success})
	// Nor is a call that follows a Retry-After: the shared pause paced it.
	tk, err = g2.Admit(WithCallInfo(ctx, CallInfo{Retry: true, Paced: true}), "p", "m")
	if err != nil {
		t.Fatalf("retry after a Retry-After with the budget spent: %v", err)
	}
	tk.Done(Report{Verdict: breaker.Success})
	if r := g2.Stats().Retries[pm]; r != (quota.Retries{Requests: 2, Retries: 1, Denied: 1}) {
		t.Fatalf("budget counts %+v, want 2 requests, 1 retry, 1 denied", r)
	}
	if c := g2.Stats().Calls["p/m"]; c.Refused != 1 || c.Open != 0 {
		t.Fatalf("calls %+v: a retry the budget refused is refused, not open", c)
	}
}

// The retry budget is per model too: a model whose retries spent its
// budget leaves a sibling model's retries alone.
func TestSharedGateRetryBudgetIsPerModel(t *testing.T) {
	ctx := context.Background()
	g, _ := sharedGate(t, provider.Config{Models: []string{"m1", "m2"}, RetryBudget: quota.BudgetConfig{Ratio: 0.5, MinRetries: -1}})
	retry := WithCallInfo(ctx, CallInfo{Retry: true})
	for _, m := range []string{"m1", "m1", "m2", "m2"} {
		tk, err := g.Admit(ctx, "p", m)
		if err != nil {
			t.Fatal(err)
		}
		tk.Done(Report{Verdict: breaker.Success})
	}
	tk, err := g.Admit(retry, "p", "m1")
	if err != nil {
		t.Fatalf("m1's first retry: %v", err)
	}
	tk.Done(Report{Verdict: breaker.Failure, Class: upstream.Transient, Err: errors.New("cut")})
	if _, err := g.Admit(retry, "p", "m1"); !errors.Is(err, ErrRetryBudget) {
		t.Fatalf("m1's second retry: %v, want its budget spent", err)
	}
	tk, err = g.Admit(retry, "p", "m2")
	if err != nil {
		t.Fatalf("m2's retry after m1 spent its budget: %v", err)
	}
	tk.Done(Report{Verdict: breaker.Success})
}

func TestSharedGateRoutesByCanaryWeight(t *testing.T) {
	_, js := relaytest.Connect(t, relaytest.NATS(t), streams.Topology{})
	catalog, err := provider.NewCatalog([]provider.Config{
		{Name: "stable", BaseURL: "http://127.0.0.1:1/v1", Models: []string{"m"}},
		{Name: "new", BaseURL: "http://127.0.0.1:2/v1", Models: []string{"m"}},
	}, provider.Model{Name: "m", Canary: &canary.Config{Provider: "new"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g, err := NewSharedGate(ctx, SharedGateConfig{ID: "w"}, SharedGateDeps{JS: js, Catalog: catalog})
	if err != nil {
		t.Fatal(err)
	}
	go g.Run(ctx)
	<-g.Synced()
	names := func(id string) (out []string) {
		for _, c := range g.Route(id, "m", catalog.Route("m")) {
			out = append(out, c.Provider.Name)
		}
		return out
	}
	if got := names("s1"); len(got) != 1 || got[0] != "stable" {
		t.Fatalf("before the ramp: %v", got)
	}
	putState(t, js, wire.CanaryBucket, "m", canary.State{Model: "m", Provider: "new", Phase: canary.Ramping, Weight: 100})
	relaytest.Eventually(t, time.Second, 5*time.Millisecond, func() bool { return len(names("s1")) == 2 })
	if got := names("s1"); got[0] != "new" || got[1] != "stable" {
		t.Fatalf("at 100%%: %v", got)
	}
}
