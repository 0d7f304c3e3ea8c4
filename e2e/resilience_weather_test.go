package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relaydev/relay/relay/config"
	"github.com/relaydev/relay/relay/fleet/breaker"
	"github.com/relaydev/relay/relay/mockupstream"
	"github.com/relaydev/relay/relay/relaytest"
	"github.com/relaydev/relay/relay/wire"
)

// Weather against outage, with the shared gate's defaults: the retry
// budget and the breaker leave a provider that answers to the retries,
// and stop one that does not.

// On an idle cluster a request gets the retry depth of a plain SDK: a
// stream cut three times, and one refused with a 503 three times, both end
// done, with no retry refused and the breaker closed.
func TestBudgetLetsAQuietClusterRetry(t *testing.T) {
	c := start(t, options{Fleet: true, Workers: 1, Mock: mockupstream.Config{Tokens: 20, TokenInterval: -1}})
	began := time.Now()
	for _, tc := range []struct{ content, seams string }{
		{"[[mock: cut_after=2, times=3]] Quiet cuts.", "continuation:mock/mock-1#2 continuation:mock/mock-1#3 continuation:mock/mock-1#4"},
		{"[[mock: status=503, times=3]] Quiet refusals.", "retry:mock/mock-1#4"},
	} {
		a := ask(t, c.Edge, "mock-1", tc.content)
		a.expectDone(t, answerText(tc.content, 20), 4)
		if got := strings.Join(a.seams(), " "); got != tc.seams {
			t.Fatalf("%s: seams %q, want %q", tc.content, got, tc.seams)
		}
	}
	if took := time.Since(began); took > 10*time.Second {
		t.Fatalf("took %v", took)
	}
	s := c.gates[0].Stats()
	if r := s.Retries[mockOne]; r.Denied != 0 || len(s.Transitions) != 0 {
		t.Fatalf("retries %+v, breaker transitions %v: want none refused, none made", r, s.Transitions)
	}
}

// About 200 requests of answers that take 0.6s, 25 at a time, to a
// provider that cuts 5% of its calls, stalls 5% mid-answer and answers 3%
// with a 429: every request ends done, and the breaker never opens. The
// first cuts and stalls come before any answer has finished, which opened
// the breaker when only a finished answer counted as a success.
func TestBreakerStaysClosedInWeather(t *testing.T) {
	const requests = 200
	c := start(t, options{Fleet: true, Workers: 1, Mock: mockupstream.Config{Tokens: 30, TokenInterval: 20 * time.Millisecond},
		Tune: func(cfg *config.Config) {
			p := &cfg.Providers[0]
			p.FirstTokenTimeout, p.StallTimeout = 5*time.Second, 500*time.Millisecond
		}})
	weather := func(i int) string {
		switch {
		case i%20 == 3: // cut twice: two calls of every 20 requests
			return "[[mock: cut_after=2, times=2]] "
		case i%20 == 13:
			return "[[mock: stall_after=3, stall_for=2s]] "
		case i%33 == 16:
			return "[[mock: status=429]] "
		}
		return ""
	}
	var mu sync.Mutex
	statuses := map[int]int{}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 25)
	for i := range requests {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			status, _, body, err := unary(context.Background(), c.Edge, "mock-1", fmt.Sprintf("%sWeather %d.", weather(i), i))
			if err != nil {
				t.Error(err)
				return
			}
			if status != http.StatusOK {
				t.Errorf("request %d: %d %s", i, status, body)
			}
			mu.Lock()
			statuses[status]++
			mu.Unlock()
		})
	}
	wg.Wait()
	calls := len(c.fronts["mock"].allChats())
	if evs := c.events.transitions(""); len(evs) != 0 {
		t.Fatalf("the breaker moved in weather: %v", evs)
	}
	denied := c.gates[0].Stats().Retries[mockOne].Denied
	t.Logf("%d requests, %d calls, %d retries refused by the budget; statuses %v", requests, calls, denied, statuses)
	if statuses[http.StatusOK] != requests || calls < requests+20 || denied != 0 {
		t.Fatalf("statuses %v over %d calls, %d retries refused: want every request done after its retries", statuses, calls, denied)
	}
}

// A provider that answers every call with a 503 opens the breaker after
// breaker.DefaultFailures calls; while it is open new requests that ask to
// fail fast get a fast 503 without reaching it, and once the cooldown is
// over it sees one probe.
func TestBreakerOpensOnAnOutage(t *testing.T) {
	const cooldown = 2 * time.Second
	c := start(t, options{Fleet: true, Workers: 1, Mock: mockupstream.Config{Tokens: 6, TokenInterval: -1},
		Tune: func(cfg *config.Config) {
			cfg.Providers[0].Breaker = breaker.Config{Cooldown: cooldown, MaxCooldown: 2 * cooldown, MaxWait: 10 * time.Second}
		}})
	front := c.fronts["mock"]
	log := c.watchBreaker("mock")
	front.down.Store(true)
	began := time.Now()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	// One request: its calls fail one after the other until the breaker
	// opens, then it waits for the breaker (and probes it).
	go unary(ctx, c.Edge, "mock-1", "Outage.")
	opened := log.waitFor(t, breaker.Open, began, 10*time.Second).state
	if n := len(front.chats(began, opened.Since)); n != breaker.DefaultFailures || !strings.HasPrefix(opened.Reason, fmt.Sprintf("%d failures in a row", breaker.DefaultFailures)) {
		t.Fatalf("opened after %d calls, by %q; want %d failures in a row", n, opened.Reason, breaker.DefaultFailures)
	}
	for i := range 5 {
		at := time.Now()
		status, ra, body, err := unaryWith(ctx, c.Edge, "mock-1", fmt.Sprintf("While open %d.", i), http.Header{"X-Relay-Fail-Fast": {"true"}})
		if err != nil || status != http.StatusServiceUnavailable || ra == "" || time.Since(at) > time.Second ||
			!strings.Contains(string(body), `"code":"`+wire.CodeBreakerOpen+`"`) {
			t.Fatalf("a new request while open: %d, Retry-After %q, %s %v after %v; want a fast 503 naming the breaker", status, ra, body, err, time.Since(at))
		}
	}
	// The probe fails and opens the breaker again; until then the
	// provider saw that call alone.
	relaytest.Eventually(t, 3*cooldown, 10*time.Millisecond, func() bool { return len(c.events.transitions(breaker.Open)) == 2 })
	reopened := c.events.transitions(breaker.Open)[1]
	if n := len(front.chats(opened.Since, reopened.At)); n != 1 {
		t.Fatalf("the dead provider saw %d calls between the open and the failed probe, want the probe alone", n)
	}
}
