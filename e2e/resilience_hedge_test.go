package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/relaydev/relay/relay/config"
	"github.com/relaydev/relay/relay/mockupstream"
	"github.com/relaydev/relay/relay/provider"
	"github.com/relaydev/relay/relay/relaytest"
)

// Hedging: a call that has produced no token by its model's
// first_token_sla is joined by the next candidate of the route, and the
// first token wins the stream.

// Two providers of mock-1, "slow" first; slow's call waits an hour for its
// first token. The answer comes from "fast", started when the SLA passed,
// within about the SLA plus fast's time to first token, whole and exact,
// and slow's call is cancelled.
func TestHedgeAnswersWhenTheFirstProviderStallsBeforeItsFirstToken(t *testing.T) {
	t.Parallel()
	const sla = 400 * time.Millisecond
	sys := start(t, options{
		Providers: []string{"slow", "fast"},
		Record:    true,
		Mock:      mockupstream.Config{Tokens: 30, TokenInterval: -1, TTFT: mockupstream.TTFT{P50: 50 * time.Millisecond}},
		Tune: func(cfg *config.Config) {
			cfg.Models = []provider.Model{{Name: "mock-1", FirstTokenSLA: sla}}
		},
	})
	// The directive holds for the conversation's first call alone: slow's.
	const content = "[[mock: first_token_after=1h]] Anyone quick?"
	a := ask(t, sys.Edge, "mock-1", content)
	a.expectDone(t, answerText(content, 30), 2)
	expectSeams(t, a, "fallback:fast/mock-1#2")
	// fast's first token is drawn around 50ms (at most ~2.5× that); the
	// rest is the relay's own path on a loaded machine.
	if a.firstText < sla || a.firstText > sla+1500*time.Millisecond {
		t.Fatalf("first text after %v, want the SLA (%v) plus about fast's time to first token", a.firstText, sla)
	}
	if slow, fast := len(sys.fronts["slow"].allChats()), len(sys.fronts["fast"].allChats()); slow != 1 || fast != 1 {
		t.Fatalf("calls: slow %d, fast %d; want one each", slow, fast)
	}
	relaytest.Eventually(t, 10*time.Second, 10*time.Millisecond, func() bool { return sys.Mock.Stats().FirstTokenAbandoned == 1 })
	relaytest.Eventually(t, 10*time.Second, 10*time.Millisecond, func() bool { return len(sys.Gate.verdicts()) == 2 })
	expectVerdicts(t, sys.Gate, "fast/mock-1:success", "slow/mock-1:neutral")
}

// With hedge_after: p95, the hedge waits the provider's usual first-token
// time as the fleet measured it, not the fixed first_token_sla: the
// worker's times reach the coordinator with its quota reports, and the
// coordinator's figures come back to the worker's gate.
func TestHedgeAfterAdaptsToTheFleetsFirstTokenTimes(t *testing.T) {
	t.Parallel()
	const sla = 4 * time.Second // the fallback, far above slow's usual ~50ms
	sys := start(t, options{
		Providers:   []string{"slow", "fast"},
		Fleet:       true,
		Coordinator: true,
		Mock:        mockupstream.Config{Tokens: 20, TokenInterval: -1, TTFT: mockupstream.TTFT{P50: 50 * time.Millisecond}},
		Tune: func(cfg *config.Config) {
			cfg.Models = []provider.Model{{Name: "mock-1", FirstTokenSLA: sla, HedgeAfter: "p95"}}
		},
	})
	for i := range 25 {
		// Once figures exist, a warm-up slower than slow's p95 is hedged
		// too: one or two calls, the answer exact either way.
		content := fmt.Sprintf("warm-up %d", i)
		if a := ask(t, sys.Edge, "mock-1", content); a.text != answerText(content, 20) || a.status != "done" {
			t.Fatalf("warm-up %d: %q, status %q", i, a.text, a.status)
		}
	}
	var p95 time.Duration
	relaytest.Eventually(t, 20*time.Second, 20*time.Millisecond, func() bool {
		var ok bool
		p95, ok = sys.gates[0].TTFTQuantile("slow", "mock-1", 0.95)
		return ok
	})
	if p95 > time.Second {
		t.Fatalf("slow's p95 = %v, want about its ~50ms", p95)
	}
	const content = "[[mock: first_token_after=1h]] Quick, please"
	a := ask(t, sys.Edge, "mock-1", content)
	a.expectDone(t, answerText(content, 20), 2)
	expectSeams(t, a, "fallback:fast/mock-1#2")
	if a.firstText < p95 || a.firstText > sla/2 {
		t.Fatalf("first text after %v; want after slow's p95 (%v), far before the fixed SLA (%v)", a.firstText, p95, sla)
	}
}
