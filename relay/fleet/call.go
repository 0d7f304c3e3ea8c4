package fleet

import (
	"context"
	"time"

	"github.com/relaydev/relay/relay/fleet/breaker"
	"github.com/relaydev/relay/relay/provider"
	"github.com/relaydev/relay/relay/upstream"
	"github.com/relaydev/relay/relay/wire"
)

// The seam between the worker's attempt loop and admission: the loop asks
// a gate before each call (SharedGate.Admit in a cluster), tells the
// Ticket it got how the call ended, and may pass a CallInfo in the
// context of the call.

// Ticket is one admitted call.
type Ticket interface {
	// Done reports how the call ended. It is called exactly once, also
	// when the call was never made because the job stopped.
	Done(Report)
}

// NoTicket is the Ticket of a call that nothing counts.
type NoTicket struct{}

// Done does nothing.
func (NoTicket) Done(Report) {}

// Report is the outcome of one admitted call.
type Report struct {
	Provider, Model string
	Verdict         breaker.Verdict
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
	// Streamed: the provider sent content (text or a tool call) before
	// the call ended. A breaker counts such a call as a success even if it
	// failed later: the provider answers, and a cut now and then is not an
	// outage.
	Streamed bool
	// TTFT is the call's time to its first token, zero if it produced
	// none: the fleet's first-token figures (hedging) are made of them.
	TTFT time.Duration
}

// CallInfo is what a Gate may know about the call it is asked to admit,
// beyond the provider and model: the attempt loop puts it in Admit's
// context (CallInfoFrom reads it).
type CallInfo struct {
	// StreamID is the request's stream.
	StreamID string
	// Retry: the request called this scope (ScopeOf: the model on the
	// provider, or the provider) before, so this call is a retry (or a
	// continuation) on it, which the scope's retry budget counts.
	Retry bool
	// AfterContent: the request's previous call streamed content before
	// it was cut or stalled, and this call continues that answer. The
	// provider answers: a retry budget, which keeps retries off a provider
	// that fails, does not count such a call (see quota.Budget).
	AfterContent bool
	// Paced: the request's previous call on this provider was answered
	// with a Retry-After, which the gate shares as a pause: the pause
	// paces this call, so a retry budget, whose purpose is pacing, does
	// not count it either. A 429 storm is then waited out, as a plain
	// SDK that honours Retry-After would, instead of failing requests
	// for want of budget.
	Paced bool
	// FailFast: the client asked not to wait for a provider
	// (wire.Request.FailFast), and this is the request's first call. A
	// gate refuses it at once where another call would wait for a pause,
	// a breaker's probe or a rate limit. A request that already streamed
	// to its client waits like any other: its stream is open.
	FailFast bool
	// Alternatives is how many later candidates of the route are still
	// open, or 1 for a request with none that has a kept answer to fall
	// back on: with one, a refusal moves the request on at once, so a
	// gate should not make it wait.
	Alternatives int
}

type callInfoKey struct{}

// WithCallInfo returns ctx carrying info.
func WithCallInfo(ctx context.Context, info CallInfo) context.Context {
	return context.WithValue(ctx, callInfoKey{}, info)
}

// CallInfoFrom returns the CallInfo in ctx; the zero CallInfo (a new
// request, no alternatives) if there is none.
func CallInfoFrom(ctx context.Context) CallInfo {
	info, _ := ctx.Value(callInfoKey{}).(CallInfo)
	return info
}

// Router is implemented by a Gate that also orders routes (canary
// routing): the attempt loop asks it once per job for the route of the
// request's model, given the catalog's.
type Router interface {
	Route(streamID, model string, route []provider.Candidate) []provider.Candidate
}

// Judge is implemented by a Router that judges the routes it ordered by
// how their streams ended for the clients: a canary is judged by what its
// clients see, not only by its calls (canary.Counts). The worker that
// ends a stream with its terminal frame tells it once.
type Judge interface {
	Router
	StreamEnded(StreamEnd)
}

// StreamEnd is how a stream whose route a Router ordered ended.
type StreamEnd struct {
	// StreamID names the stream, as it was given to Route.
	StreamID string
	// Model is the requested model, whose route was ordered.
	Model string
	// First is the candidate the route put first; Last the one the stream
	// ended on: its last call, or the last candidate the gate refused.
	First, Last provider.Candidate
	// Status is the stream's terminal status.
	Status wire.Status
}

// StartedTicket is implemented by a Ticket that wants to know when its
// call was answered with a stream (a 2xx response): a breaker's probe
// succeeds then, rather than only at the end of a long answer.
type StartedTicket interface {
	Ticket
	// Started is called at most once, before Done.
	Started()
}
