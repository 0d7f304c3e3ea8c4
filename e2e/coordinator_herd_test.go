package e2e

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relaydev/relay/relay/backoff"
	"github.com/relaydev/relay/relay/config"
	"github.com/relaydev/relay/relay/fleet/breaker"
	"github.com/relaydev/relay/relay/fleet/quota"
	"github.com/relaydev/relay/relay/mockupstream"
	"github.com/relaydev/relay/relay/relaytest"
)

// Issue 6, test 1: 200 streams are running when the provider goes down.
// The cuts trip the breaker; while it is open the provider gets no request
// but the probes (one per half-open period); when it is back, a probe
// closes the breaker and the 200 waiting continuations arrive spread over
// the recovery window, not together, and every answer is complete.
//
// The outage lasts 6s instead of the 10s, with a 1s cooldown that
// doubles to 2s: that is still three to four failed probes and an open
// breaker for most of the outage, and keeps the test near 15s.
func TestCoordinatorThunderingHerd(t *testing.T) {
	const (
		streams = 200
		tokens  = 150
		outage  = 6 * time.Second
		jitter  = 2 * time.Second
		grace   = 500 * time.Millisecond // calls admitted before the workers knew of the open may still arrive
	)
	c := start(t, options{
		Fleet:       true,
		Workers:     3,
		Coordinator: true,
		Mock:        mockupstream.Config{Tokens: tokens, TokenInterval: 20 * time.Millisecond},
		Tune: func(cfg *config.Config) {
			p := &cfg.Providers[0]
			p.Retry = backoff.Config{Base: 50 * time.Millisecond, Cap: 200 * time.Millisecond, MaxRetries: 30}
			p.Breaker = breaker.Config{Cooldown: time.Second, MaxCooldown: 2 * time.Second, RecoveryJitter: jitter, MaxWait: 20 * time.Second, ProbeTimeout: 5 * time.Second}
			// This test is about the breaker: every stream may retry.
			p.RetryBudget = quota.BudgetConfig{Ratio: -1}
		},
	})
	front := c.fronts["mock"]
	log := c.watchBreaker("mock")

	results := make([]error, streams)
	var wg sync.WaitGroup
	for i := range streams {
		wg.Go(func() {
			content := fmt.Sprintf("Thundering herd, stream %d.", i)
			a, err := read(c.Edge, "mock-1", content)
			switch {
			case err != nil:
				results[i] = err
			case a.text != answerText(content, tokens) || a.status != "done":
				results[i] = fmt.Errorf("status %q (%s %s), %d of %d bytes", a.status, a.errType, a.errMsg, len(a.text), len(answerText(content, tokens)))
			}
		})
	}
	relaytest.Eventually(t, 60*time.Second, 5*time.Millisecond, func() bool { return len(front.allChats()) >= streams })
	time.Sleep(300 * time.Millisecond) // every stream has text out
	down := time.Now()
	front.down.Store(true)
	opened := log.waitFor(t, breaker.Open, down, 10*time.Second)
	learned := c.learnedOpen("mock")
	time.Sleep(outage - time.Since(down))
	front.down.Store(false)
	up := time.Now()
	closed := log.waitFor(t, breaker.Closed, up, 20*time.Second)
	wg.Wait()

	failed := 0
	for i, err := range results {
		if err != nil {
			failed++
			if failed <= 3 {
				t.Errorf("stream %d: %v", i, err)
			}
		}
	}
	if failed > 0 {
		t.Fatalf("%d of %d streams did not finish", failed, streams)
	}

	// While open, nothing but probes: every chat request from a little
	// after every worker knew of the open to the moment it closed (the
	// breaker's own time) is the probe of a worker's claim; the
	// coordinator's claims probe with GET /models.
	open, shut := opened.state.Since, closed.state.Since
	claims := 0
	for _, ev := range c.events.transitions(breaker.HalfOpen) {
		if !ev.At.Before(open) && ev.At.Before(shut) {
			claims++
		}
	}
	coordClaims := 0
	for _, ev := range c.events.coordEvents("probe") {
		if strings.Contains(ev.Text, "claimed") && !ev.At.Before(open) && ev.At.Before(shut) {
			coordClaims++
		}
	}
	during := front.chats(learned.Add(grace), shut)
	if len(during) > claims || claims+coordClaims == 0 {
		t.Fatalf("%d chat requests while the breaker was open or probing, with %d probe claims by workers and %d by the coordinator", len(during), claims, coordClaims)
	}
	t.Logf("outage %v: breaker open %v after it began, %d+%d probe claims (workers+coordinator), %d chat probes, closed %v after the provider was back",
		outage, open.Sub(down).Round(time.Millisecond), claims, coordClaims, len(during), shut.Sub(up).Round(time.Millisecond))

	// After the close, the waiting continuations spread over the window.
	after := front.chats(shut, shut.Add(jitter+time.Second))
	var offsets []time.Duration
	for _, call := range after {
		offsets = append(offsets, call.at.Sub(shut))
	}
	p10, p90, maxBin := spreadOf(offsets, jitter)
	t.Logf("%d continuations after the close: p10 %v, p90 %v, fullest tenth of the window %.0f%%",
		len(after), p10.Round(time.Millisecond), p90.Round(time.Millisecond), 100*maxBin)
	switch {
	case len(after) < streams*3/4:
		t.Fatalf("only %d of %d continuations arrived within the window", len(after), streams)
	case p90-p10 < jitter/2:
		t.Fatalf("continuations bunched: p10 %v, p90 %v over a %v window", p10, p90, jitter)
	case maxBin > 0.3:
		t.Fatalf("%.0f%% of the continuations in one tenth of the window", 100*maxBin)
	}
}
