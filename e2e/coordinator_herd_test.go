package e2e

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relaydev/relay/relay/backoff"
	"github.com/relaydev/relay/relay/config"
	"github.com/relaydev/relay/relay/fleet/breaker"
	"github.com/relaydev/relay/relay/fleet/quota"
	"github.com/relaydev/relay/relay/mockupstream"
	"github.com/relaydev/relay/relay/relaytest"
)

// 200 streams are running when the provider goes down. The cuts trip the
// breaker; while it is open the provider gets no request but the probes
// (one per half-open period); when it is back, a probe closes the breaker
// and the 200 waiting continuations arrive spread over the recovery window,
// not together, and every answer is complete.
//
// The outage lasts 6s instead of the 10s, with a 1s cooldown that
// doubles to 2s: that is still three to four failed probes and an open
// breaker for most of the outage, and keeps the test near 20s.
//
// Every answer holds after its first tokens (keeping its connection alive
// with comments) until the outage cuts it, so all 200 are running when it
// begins however long a loaded machine takes to start them; the
// continuations are judged by the breaker's own close time and the times
// the provider received them.
func TestCoordinatorThunderingHerd(t *testing.T) {
	const (
		streams = 200
		tokens  = 150
		outage  = 6 * time.Second
		jitter  = 2 * time.Second
		grace   = 500 * time.Millisecond // calls admitted before the workers knew of the open may still arrive
		// hold stops each answer's first call after 5 tokens, for longer
		// than the test lasts; its continuations are answered in full.
		hold = "[[mock: stall_after=5, stall_for=5m]]"
	)
	c := start(t, options{
		Fleet:       true,
		Workers:     3,
		Coordinator: true,
		Mock:        mockupstream.Config{Tokens: tokens, TokenInterval: 20 * time.Millisecond, CommentInterval: 100 * time.Millisecond},
		Tune: func(cfg *config.Config) {
			p := &cfg.Providers[0]
			p.Retry = backoff.Config{Base: 50 * time.Millisecond, Cap: 200 * time.Millisecond, MaxRetries: 30}
			// MaxWait is no figure of the test, only room: when the 200
			// continuations resume at once on a loaded machine, NATS can
			// lag for seconds, and a worker's copy of the close with it;
			// a continuation that outwaits MaxWait gives up.
			p.Breaker = breaker.Config{Cooldown: time.Second, MaxCooldown: 2 * time.Second, RecoveryJitter: jitter, MaxWait: time.Minute, ProbeTimeout: 5 * time.Second}
			// This test is about the breaker: every stream may retry.
			p.RetryBudget = quota.BudgetConfig{Ratio: -1}
		},
	})
	front := c.fronts["mock"]
	log := c.watchBreaker("mock")

	// A safety net only: the streams are waited for, not timed.
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	results := make([]error, streams)
	var texted, untexted atomic.Int32 // streams that received text, streams that ended without
	var wg sync.WaitGroup
	for i := range streams {
		wg.Go(func() {
			content := fmt.Sprintf("Thundering herd, stream %d. %s", i, hold)
			got := false
			a, err := readWith(ctx, c.Edge, map[string]any{
				"model": "mock-1", "stream": true,
				"messages": []mockupstream.Message{{Role: "user", Content: content}},
			}, func() { got = true; texted.Add(1) })
			if !got {
				untexted.Add(1)
			}
			switch {
			case err != nil:
				results[i] = err
			case a.text != answerText(content, tokens) || a.status != "done":
				results[i] = fmt.Errorf("status %q (%s %s), %d of %d bytes", a.status, a.errType, a.errMsg, len(a.text), len(answerText(content, tokens)))
			}
		})
	}
	relaytest.Eventually(t, 3*time.Minute, 5*time.Millisecond, func() bool { return texted.Load()+untexted.Load() == streams })
	if n := untexted.Load(); n > 0 {
		wg.Wait()
		t.Fatalf("%d of %d streams ended before any text: %v", n, streams, errors.Join(results...))
	}
	down := time.Now()
	front.down.Store(true)
	opened := log.waitFor(t, breaker.Open, down, 30*time.Second)
	learned := c.learnedOpen(mockOne)
	time.Sleep(outage - time.Since(down)) // the outage itself, not a wait for something
	front.down.Store(false)
	up := time.Now()
	closed := log.waitFor(t, breaker.Closed, up, time.Minute)
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
	// coordinator's probes are left out of chats.
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

	// After the close, the waiting continuations spread over the window:
	// each stream's first call after the close, as the provider received
	// it. Every stream was cut, so each continues after the close unless
	// its continuation was a probe; one delayed past the window by a
	// loaded machine counts in no tenth of it.
	first := map[string]time.Duration{}
	for _, call := range front.chats(shut, time.Now()) {
		if _, ok := first[call.conv]; !ok {
			first[call.conv] = call.at.Sub(shut)
		}
	}
	var offsets []time.Duration
	for _, d := range first {
		offsets = append(offsets, d)
	}
	p10, p90, maxBin := spreadOf(offsets, jitter)
	t.Logf("%d continuations after the close: p10 %v, p90 %v, fullest tenth of the window %.0f%%",
		len(offsets), p10.Round(time.Millisecond), p90.Round(time.Millisecond), 100*maxBin)
	switch {
	case len(offsets) < streams-claims:
		t.Fatalf("only %d of %d streams continued after the close (%d probe claims)", len(offsets), streams, claims)
	case p90-p10 < jitter/2:
		t.Fatalf("continuations bunched: p10 %v, p90 %v over a %v window", p10, p90, jitter)
	case maxBin > 0.3:
		t.Fatalf("%.0f%% of the continuations in one tenth of the window", 100*maxBin)
	}
}
