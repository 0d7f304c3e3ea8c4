package worker

import (
	"testing"
	"time"

	"github.com/relaydev/relay/relay/backoff"
	"github.com/relaydev/relay/relay/fleet/breaker"
	"github.com/relaydev/relay/relay/provider"
)

func TestRouteStateNext(t *testing.T) {
	p := func(name string, maxRetries int) provider.Config {
		return provider.Config{Name: name, Retry: backoff.Config{MaxRetries: maxRetries}}
	}
	a, b := p("a", 4), p("b", -1)
	route := []provider.Candidate{
		{Provider: a, Model: "m1", MaxRetries: 2},
		{Provider: a, Model: "m2", MaxRetries: 5},
		{Provider: b, Model: "m1", MaxRetries: 3},
	}
	s := newRouteState(route)
	// (candidate that failed, whether it made progress) → where the next
	// call goes; -1: give up.
	for n, step := range []struct {
		failed int
		want   int
	}{
		{0, 0}, // a/m1: retry 1 of 2
		{0, 0}, // a/m1: retry 2 of 2
		{0, 1}, // a/m1 spent: fall back to a/m2 (a has made 3 calls of 5)
		{1, 1}, // a/m2: a's 5th call (retry 4 of a's 4)
		{1, 2}, // a spent: b/m1 (its first call is free)
		{2, -1},
	} {
		s.failed(step.failed, false, 0)
		next, ok := s.next(step.failed)
		if !ok {
			next = -1
		}
		if next != step.want {
			t.Fatalf("step %d: after candidate %d failed, next = %d, want %d", n, step.failed, next, step.want)
		}
	}
}

func TestRouteStateStaysWithoutFallback(t *testing.T) {
	// With nothing to fall back to, a candidate past its own retries
	// keeps going while its provider's budget lasts.
	s := newRouteState([]provider.Candidate{{Provider: provider.Config{Name: "a"}, Model: "m", MaxRetries: 1}})
	for range backoff.DefaultMaxRetries {
		s.failed(0, true, 0)
		if next, ok := s.next(0); !ok || next != 0 {
			t.Fatalf("after %d calls: next = %d, %v; want a retry", s.calls["a"], next, ok)
		}
	}
	s.failed(0, true, 0)
	if _, ok := s.next(0); ok {
		t.Fatal("retried past the provider's max_retries")
	}
}

func TestRouteStateClosed(t *testing.T) {
	a, b := provider.Config{Name: "a"}, provider.Config{Name: "b"}
	route := []provider.Candidate{{Provider: a, Model: "m1", MaxRetries: 3}, {Provider: a, Model: "m2", MaxRetries: 3}, {Provider: b, Model: "m1", MaxRetries: 3}}
	s := newRouteState(route)
	s.closeProvider("a")
	if next, ok := s.next(0); !ok || next != 2 {
		t.Fatalf("next = %d, %v; want b, skipping every candidate on a", next, ok)
	}
	s.close(2)
	if _, ok := s.next(2); ok {
		t.Fatal("a closed candidate was offered")
	}
}

func TestRouteStateBackoffStreak(t *testing.T) {
	s := newRouteState([]provider.Candidate{{Provider: provider.Config{Name: "a"}, Model: "m", MaxRetries: 9}})
	for i, tc := range []struct {
		progress bool
		want     int
	}{{false, 1}, {false, 2}, {true, 1}, {false, 2}, {false, 3}} {
		s.failed(0, tc.progress, 0)
		if s.streak != tc.want {
			t.Fatalf("failure %d: streak %d, want %d", i, s.streak, tc.want)
		}
	}
}

// A call answered with a Retry-After is waited out, not counted, while the
// waits the provider asked of the request add up to no more than its
// breaker.max_wait; past that, such calls count like any other failure.
func TestRouteStatePacedCallsAreNotCounted(t *testing.T) {
	p := provider.Config{Name: "a", Retry: backoff.Config{MaxRetries: 1}, Breaker: breaker.Config{MaxWait: 10 * time.Second}}
	s := newRouteState([]provider.Candidate{{Provider: p, Model: "m", MaxRetries: 1}})
	for i := range 5 {
		s.failed(0, false, 2*time.Second)
		if next, ok := s.next(0); !ok || next != 0 || !s.paced || s.tries[0] != 0 {
			t.Fatalf("429 %d with Retry-After 2s: next %d %v, paced %v, tries %d; want a retry not counted", i+1, next, ok, s.paced, s.tries[0])
		}
	}
	s.failed(0, false, 2*time.Second) // 12s asked: past the bound
	if s.paced || s.tries[0] != 1 {
		t.Fatalf("past max_wait: paced %v, tries %d; want counted", s.paced, s.tries[0])
	}
	s.failed(0, false, 0)
	if _, ok := s.next(0); ok || s.paced {
		t.Fatal("a failure without Retry-After past the retries was retried")
	}
}
