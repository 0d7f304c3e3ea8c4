package worker

import (
	"time"

	"github.com/relaydev/relay/relay/fleet"
	"github.com/relaydev/relay/relay/provider"
)

// routeState is the retry budget of one request walking its route
// (provider.Catalog.Route), and where its next attempt goes:
//
//   - a candidate (a model on a provider) gets up to its MaxRetries retries
//     (none after a call that got no byte within its first-byte bound),
//     then the next open candidate of the route takes over, continuing the
//     answer; with none left, retries go on where they are while the
//     provider's budget lasts;
//   - a provider gets up to retry.max_retries retries per request, over all
//     its candidates: every call after the first counts, whether a retry,
//     a continuation or a fallback onto it;
//   - the route only moves forward, and skips candidates that are closed:
//     refused by the Gate, on a provider whose keys were all refused,
//     asking for a longer wait than the relay makes a client bear, or
//     whose context window the request was found not to fit (outgrow).
//
// Calls that fix themselves at once (a rejected key replaced by the next,
// a rejected prefill replaced by prompt mode) are not counted, nor are
// calls the provider answered with a Retry-After while the waits it asked
// of the request add up to no more than its breaker.max_wait: a provider
// that says when to come back is a queue (as its shared pause is), and a
// 429 storm costs the request time, not its retries.
type routeState struct {
	route  []provider.Candidate
	calls  map[string]int // calls made per provider
	tries  []int          // calls made per candidate
	closed []bool
	// afterContent: the last failed call published text before it
	// failed, so the next call continues an answer its provider was
	// giving (fleet.CallInfo.AfterContent).
	afterContent bool
	// paced: the last failed call asked to wait (Retry-After), which the
	// gate shares as a pause that paces the next call
	// (fleet.CallInfo.Paced), and was not counted.
	paced bool
	// pacedFor adds up the waits asked by the calls not counted.
	pacedFor time.Duration
	// streak counts the failures in a row on the current candidate since
	// it last published text: the exponent of the backoff. A call that
	// made progress proves the provider works, so the wait starts small
	// again.
	streak int
}

// newRouteState returns a route state on the heap: kept out of line, it
// takes no room in its caller's frame (stack.go).
//
//go:noinline
func newRouteState(route []provider.Candidate) *routeState {
	return &routeState{
		route:  route,
		calls:  map[string]int{},
		tries:  make([]int, len(route)),
		closed: make([]bool, len(route)),
	}
}

// failed records a failed call of candidate i, which published text if
// progress, and asked the relay to wait retryAfter before the next.
func (s *routeState) failed(i int, progress bool, retryAfter time.Duration) {
	s.afterContent = progress
	s.paced = s.pace(i, retryAfter)
	if !s.paced {
		s.calls[s.route[i].Provider.Name]++
		s.tries[i]++
	}
	if progress {
		s.streak = 0
	}
	s.streak++
}

// pace reports whether a failed call of candidate i that asked for
// retryAfter goes uncounted, and if so adds the wait to the request's.
func (s *routeState) pace(i int, retryAfter time.Duration) bool {
	bound := s.route[i].Provider.Breaker.WithDefaults().MaxWait
	if retryAfter <= 0 || bound < 0 || s.pacedFor+retryAfter > bound {
		return false
	}
	s.pacedFor += retryAfter
	return true
}

// spend uses up candidate i's retries: the route moves on to its next
// open candidate, and stays on i only if it has none.
func (s *routeState) spend(i int) { s.tries[i] = max(s.tries[i], s.route[i].MaxRetries+1) }

// outgrow takes out of the route candidate i, which refused the request as
// too long for its context window, saying it needs needed tokens (0: it
// did not say), and every later candidate that cannot fit it either: the
// same model elsewhere, a model whose window is smaller than needed, or,
// when needed is unknown, no larger than i's. A window not configured
// fits.
func (s *routeState) outgrow(i, needed int) {
	model, window := s.route[i].Model, s.route[i].ContextWindow
	for k := i; k < len(s.route); k++ {
		w := s.route[k].ContextWindow
		switch {
		case s.route[k].Model == model,
			w > 0 && needed > 0 && w < needed,
			w > 0 && needed == 0 && window > 0 && w <= window:
			s.closed[k] = true
		}
	}
}

// retry reports whether a call of candidate i is a retry for the gate: the
// request called i's scope before (its breaker's and retry budget's, the
// model on its provider or the provider; fleet.ScopeOf). A fallback onto
// a sibling model is a first call, never refused for the retries of the
// step it replaces.
func (s *routeState) retry(i int) bool {
	scope := fleet.ScopeOf(s.route[i].Provider, s.route[i].Model)
	for k := range s.route {
		if s.tries[k] > 0 && fleet.ScopeOf(s.route[k].Provider, s.route[k].Model) == scope {
			return true
		}
	}
	return false
}

// close takes candidate i out of the route.
func (s *routeState) close(i int) { s.closed[i] = true }

// closeProvider takes every candidate on provider out of the route.
func (s *routeState) closeProvider(provider string) {
	for i := range s.route {
		if s.route[i].Provider.Name == provider {
			s.closed[i] = true
		}
	}
}

// open reports whether candidate i may be called (again).
func (s *routeState) open(i int) bool {
	c := &s.route[i]
	return !s.closed[i] && s.calls[c.Provider.Name] <= c.Provider.Retry.Retries()
}

// next returns the candidate of the next attempt after one on candidate i
// failed, and false when the request has nothing left to try.
func (s *routeState) next(i int) (int, bool) {
	stay := s.open(i)
	if stay && s.tries[i] <= s.route[i].MaxRetries {
		return i, true
	}
	for k := i + 1; k < len(s.route); k++ {
		if s.open(k) {
			s.streak = 0
			return k, true
		}
	}
	return i, stay
}
