package e2e

import (
	"fmt"
	"net"
	"testing"

	"github.com/relaydev/relay/relay/config"
	"github.com/relaydev/relay/relay/fleet/quota"
	"github.com/relaydev/relay/relay/mockupstream"
	"github.com/relaydev/relay/relay/provider"
)

// Fallback chains: when a model or a provider keeps failing, the
// next step of the route continues the same answer, and the chunks say
// which provider and model wrote which part.

// This test runs the worker as the relay binary does (the shared harness),
// so the models section is seen to reach it.
func TestPrimaryModelExhaustedFallbackContinues(t *testing.T) {
	t.Parallel()
	sys := start(t, options{
		Mock: mockupstream.Config{Tokens: 40, TokenInterval: -1},
		Tune: func(cfg *config.Config) {
			cfg.Providers[0].Retry = fastRetry
			// The breaker would open after three cuts in a row and send the
			// fourth call to the fallback early; this test is about
			// max_retries_per_model, so the breaker and the retry budget
			// stay out of the way.
			cfg.Providers[0].Breaker.Failures = 10
			cfg.Providers[0].RetryBudget = quota.BudgetConfig{Ratio: -1}
			cfg.Models = []provider.Model{{Name: "mock-1", Fallbacks: []provider.Fallback{{Model: "mock-2"}}}}
		},
	})
	// mock-1 is cut after 5 tokens on its first call and its 3 retries
	// (max_retries_per_model); mock-2 takes over.
	const content = "[[mock: cut_after=5, times=4]] Hello"
	a := ask(t, sys.Edges[0], "mock-1", content)
	a.expectDone(t, answerText(content, 40), 5)
	expectSeams(t, a,
		"continuation:mock/mock-1#2", "continuation:mock/mock-1#3", "continuation:mock/mock-1#4", "fallback:mock/mock-2#5")
	if got, want := a.textOf(1, 4), tokensText(content, 40, 20); got != want {
		t.Fatalf("mock-1 wrote %q, want the first 20 tokens %q", got, want)
	}
	for _, p := range a.pieces {
		if (p.Attempt < 5) != (p.Model == "mock-1") {
			t.Fatalf("piece %+v: attempts 1-4 are mock-1's, 5 is mock-2's", p)
		}
	}
}

func TestProviderDownUsesBackupProvider(t *testing.T) {
	t.Parallel()
	dead := deadURL(t)
	sys := start(t, options{
		Record: true,
		Mock:   mockupstream.Config{Tokens: 30, TokenInterval: -1},
		Tune: withFastRetry(func(cfg *config.Config) {
			mockURL := cfg.Providers[0].BaseURL
			// In configuration order "down", then "other"; "backup" comes
			// first after "down" because "down" names it.
			cfg.Providers = []provider.Config{
				{Name: "down", BaseURL: dead, Models: []string{"mock-1"}, BackupProviders: []string{"backup"}, Retry: fastRetry},
				{Name: "other", BaseURL: dead, Models: []string{"mock-1"}, Retry: fastRetry},
				{Name: "backup", BaseURL: mockURL, Models: []string{"mock-1"}, Retry: fastRetry},
			}
		}),
	})
	const content = "Is anyone there?"
	a := ask(t, sys.Edge, "mock-1", content)
	a.expectDone(t, answerText(content, 30), 5)
	expectSeams(t, a, "fallback:backup/mock-1#5")
	expectVerdicts(t, sys.Gate,
		"down/mock-1:failure", "down/mock-1:failure", "down/mock-1:failure", "down/mock-1:failure", "backup/mock-1:success")
}

// deadURL is a provider base URL on a loopback port nothing listens on.
func deadURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return fmt.Sprintf("http://%s/v1", addr)
}
