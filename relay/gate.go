package relay

import (
	"context"
	"errors"
	"time"

	"github.com/relaydev/relay/relay/breaker"
	"github.com/relaydev/relay/relay/upstream"
)

// Gate is where the attempt loop asks before it calls a provider, and tells
// once how each call ended: the seam for cluster-wide circuit breakers,
// shared backoff and quotas. A breaker is a signal the worker consults, not
// a wrapper around the call, so the loop keeps its own retries, fallbacks
// and continuations, and a breaker sees every call exactly once.
//
// The default Gate admits every call and ignores reports.
type Gate interface {
	// Admit is asked before each upstream call of model on provider. It
	// may wait (a shared Retry-After, a quota) while ctx allows, then
	// returns a Ticket to report the call's outcome on, or an error. Once
	// ctx ended, the job stops; any other error (wrapping
	// ErrProviderUnavailable, or treated as if it did) makes the loop skip
	// to the next candidate of the route without spending a retry.
	Admit(ctx context.Context, provider, model string) (Ticket, error)
}

// Ticket is one admitted call.
type Ticket interface {
	// Done reports how the call ended. It is called exactly once, also
	// when the call was never made because the job stopped.
	Done(Report)
}

// ErrProviderUnavailable is what a Gate's refusal wraps: the provider (or
// the model on it) must not be called now.
var ErrProviderUnavailable = errors.New("relay: provider unavailable")

// Verdict is what a call says about the provider's health: the breaker's
// own type, which counts it.
type Verdict = breaker.Verdict

const (
	// Success: the provider finished the answer.
	Success = breaker.Success
	// Failure: the provider or the network failed (transient errors, cuts,
	// stalls), or its credentials were refused even after a key change.
	// The only verdict a breaker counts against the provider.
	Failure = breaker.Failure
	// Neutral: the call ended for a reason that says nothing about the
	// provider: the request's own fault, a cancellation or shutdown, a
	// rejected key that the next key replaced, a rejected prefill that
	// prompt mode replaced, or a chunk log that refused the answer.
	Neutral = breaker.Neutral
)

// Report is the outcome of one admitted call.
type Report struct {
	Provider, Model string
	Verdict         Verdict
	// Class classifies Err; meaningless when Err is nil.
	Class upstream.Class
	Err   error
	// RetryAfter is the wait the provider asked for (Retry-After,
	// retry-after-ms), zero if none: a cluster-wide gate pauses the
	// provider for everyone.
	RetryAfter time.Duration
	// Tokens is what the call used (prompt and completion), as the
	// provider reported it; zero if it did not.
	Tokens int
}

// openGate is the default Gate: every call may go ahead.
type openGate struct{}

func (openGate) Admit(context.Context, string, string) (Ticket, error) { return noTicket{}, nil }

type noTicket struct{}

func (noTicket) Done(Report) {}
