package worker

import (
	"context"
	"errors"
	"slices"

	"github.com/relaydev/relay/relay/fleet"
	"github.com/relaydev/relay/relay/provider"
	"github.com/relaydev/relay/relay/upstream"
	"github.com/relaydev/relay/relay/wire"
)

// route is the route of req: the catalog's, reordered by the gate if it
// routes, without the steps on models req's key may not use.
func (w *Worker) route(req wire.Request) []provider.Candidate {
	route := w.catalog.Route(req.Model)
	if len(req.Models) > 0 {
		// A copy: the catalog's route is shared by every request.
		route = slices.DeleteFunc(slices.Clone(route), func(c provider.Candidate) bool { return !req.Allows(c.Model) })
	}
	if r, ok := routerOf(w.gate); ok && len(route) > 0 {
		route = r.Route(req.StreamID, req.Model, route)
	}
	return route
}

// routerOf finds the Router behind a gate, through the wrappers the
// worker puts around it (metering).
func routerOf(g Gate) (fleet.Router, bool) {
	for range 4 {
		if r, ok := g.(fleet.Router); ok {
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

// admit asks the gate for a call of candidate c. A refusal is the call's
// outcome: cancelled with ctx, else the provider unavailable (transient),
// whatever the gate said why.
func (w *Worker) admit(ctx context.Context, c *provider.Candidate) (fleet.Ticket, *outcome) {
	ticket, err := w.gate.Admit(ctx, c.Provider.Name, c.Model)
	switch {
	case err == nil:
		return ticket, nil
	case ctx.Err() != nil:
		return ticket, &outcome{err: ctx.Err(), class: upstream.Canceled}
	case !errors.Is(err, fleet.ErrProviderUnavailable):
		err = chain(fleet.ErrProviderUnavailable, err)
	}
	return ticket, &outcome{err: err, class: upstream.Transient}
}

// callInfo describes the call of candidate i for the gate.
func (j *job) callInfo(s *routeState, i int, takeover bool) fleet.CallInfo {
	alternatives := 0
	for k := i + 1; k < len(s.route); k++ {
		if s.open(k) {
			alternatives++
		}
	}
	if alternatives == 0 && j.hasKept() {
		alternatives = 1
	}
	return fleet.CallInfo{
		StreamID:     j.req.StreamID,
		Retry:        s.retry(i),
		AfterContent: s.afterContent,
		Paced:        s.paced,
		FailFast:     j.req.FailFast && j.attempts == 0 && !takeover,
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

type ticketKey struct{}

// withTicket hands the admitted ticket to the attempt.
func withTicket(ctx context.Context, t fleet.Ticket) context.Context {
	if _, ok := t.(fleet.StartedTicket); !ok {
		return ctx
	}
	return context.WithValue(ctx, ticketKey{}, t)
}

// callStarted tells the ticket in ctx, if it asks, that the provider
// answered with a stream.
func callStarted(ctx context.Context) {
	if t, ok := ctx.Value(ticketKey{}).(fleet.StartedTicket); ok {
		t.Started()
	}
}
