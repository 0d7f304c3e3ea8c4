package relay

import (
	"context"

	"github.com/relaydev/relay/relay/provider"
	"github.com/relaydev/relay/relay/wire"
)

// CallInfo is what a Gate may know about the call it is asked to admit,
// beyond the provider and model: the attempt loop puts it in Admit's
// context (CallInfoFrom reads it).
type CallInfo struct {
	// StreamID is the request's stream.
	StreamID string
	// Retry: the request called this provider before, so this call is a
	// retry (or a continuation) on it, which a retry budget counts.
	Retry bool
	// Started: the request already made a call, or continues a stream
	// another worker started; it may wait for a provider to recover
	// instead of failing at once, as a new request does.
	Started bool
	// Alternatives is how many later candidates of the route are still
	// open: with one, a refusal moves the request on at once, so a gate
	// should not make it wait.
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

// route is the route of req: the catalog's, reordered by the gate if it
// routes.
func (w *Worker) route(req wire.Request) []provider.Candidate {
	route := w.catalog.Route(req.Model)
	if r, ok := routerOf(w.gate); ok && len(route) > 0 {
		route = r.Route(req.StreamID, req.Model, route)
	}
	return route
}

// routerOf finds the Router behind a gate, through the wrappers the
// worker puts around it (metering).
func routerOf(g Gate) (Router, bool) {
	for range 4 {
		if r, ok := g.(Router); ok {
			return r, true
		}
		m, ok := g.(meteredGate)
		if !ok {
			return nil, false
		}
		g = m.Gate
	}
	return nil, false
}

// callInfo describes the call of candidate i for the gate.
func (j *job) callInfo(s *routeState, i int, takeover bool) CallInfo {
	alternatives := 0
	for k := i + 1; k < len(s.route); k++ {
		if s.open(k) {
			alternatives++
		}
	}
	return CallInfo{
		StreamID:     j.req.StreamID,
		Retry:        s.calls[s.route[i].Provider.Name] > 0,
		Started:      j.attempts > 0 || takeover,
		Alternatives: alternatives,
	}
}

// tokens is the usage the job's calls reported so far.
func (j *job) tokens() int {
	if j.usage == nil {
		return 0
	}
	return j.usage.TotalTokens
}

// StartedTicket is implemented by a Ticket that wants to know when its
// call was answered with a stream (a 2xx response): a breaker's probe
// succeeds then, rather than only at the end of a long answer.
type StartedTicket interface {
	Ticket
	// Started is called at most once, before Done.
	Started()
}

type ticketKey struct{}

// withTicket hands the admitted ticket to the attempt.
func withTicket(ctx context.Context, t Ticket) context.Context {
	if _, ok := t.(StartedTicket); !ok {
		return ctx
	}
	return context.WithValue(ctx, ticketKey{}, t)
}

// callStarted tells the ticket in ctx, if it asks, that the provider
// answered with a stream.
func callStarted(ctx context.Context) {
	if t, ok := ctx.Value(ticketKey{}).(StartedTicket); ok {
		t.Started()
	}
}
