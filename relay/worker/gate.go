package worker

import (
	"context"

	"github.com/relaydev/relay/relay/fleet"
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
	Admit(ctx context.Context, provider, model string) (fleet.Ticket, error)
}

// openGate is the default Gate: every call may go ahead.
type openGate struct{}

func (openGate) Admit(context.Context, string, string) (fleet.Ticket, error) {
	return fleet.NoTicket{}, nil
}
