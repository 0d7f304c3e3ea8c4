package worker

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/relaydev/relay/relay/fleet"
	"github.com/relaydev/relay/relay/mockupstream"
	"github.com/relaydev/relay/relay/provider"
	"github.com/relaydev/relay/relay/wire"
)

// judgingGate routes every request to provider "a" first, refuses "a" to
// the streams in refuseA, and keeps the stream ends it is told.
type judgingGate struct {
	refuseA map[string]bool

	mu   sync.Mutex
	ends map[string]fleet.StreamEnd
}

func (g *judgingGate) Admit(ctx context.Context, prov, _ string) (fleet.Ticket, error) {
	if prov == "a" && g.refuseA[fleet.CallInfoFrom(ctx).StreamID] {
		return nil, fmt.Errorf("test gate: %w", fleet.ErrProviderUnavailable)
	}
	return fleet.NoTicket{}, nil
}

func (g *judgingGate) Route(_, _ string, route []provider.Candidate) []provider.Candidate {
	var a, rest []provider.Candidate
	for _, c := range route {
		if c.Provider.Name == "a" {
			a = append(a, c)
		} else {
			rest = append(rest, c)
		}
	}
	return append(a, rest...)
}

func (g *judgingGate) StreamEnded(e fleet.StreamEnd) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.ends[e.StreamID] = e
}

// end is "first->last status" of the stream's end as the gate heard it.
func (g *judgingGate) end(id string) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	e, ok := g.ends[id]
	if !ok {
		return "not told"
	}
	return e.First.Provider.Name + "->" + e.Last.Provider.Name + " " + string(e.Status)
}

// The job tells the gate that ordered its route how the stream ended: the
// route's first candidate, the one the stream ended on, and the terminal
// status. A stream the first candidate failed for good ends on it; one
// that fell back ends on the fallback.
func TestJobTellsTheRouterHowTheStreamEnded(t *testing.T) {
	ok, rejected, rescued := wire.NewStreamID(), wire.NewStreamID(), wire.NewStreamID()
	gate := &judgingGate{refuseA: map[string]bool{rescued: true}, ends: map[string]fleet.StreamEnd{}}
	h := start(t, setup{
		mock: mockupstream.Config{Tokens: 5, TokenInterval: -1},
		providers: func(url string) []provider.Config {
			return []provider.Config{
				{Name: "a", BaseURL: url, Models: []string{"mock-1"}, Retry: fastRetry},
				{Name: "b", BaseURL: url, Models: []string{"mock-1"}, Retry: fastRetry},
			}
		},
		gate: gate,
	})
	for id, content := range map[string]string{ok: "hello", rejected: "[[mock: status=400]] hello", rescued: "hello again"} {
		h.submit(id, content)
		h.waitJob(id)
	}
	for id, want := range map[string]string{ok: "a->a done", rejected: "a->a failed", rescued: "a->b done"} {
		if got := gate.end(id); got != want {
			t.Errorf("stream %s: gate told %q, want %q", id, got, want)
		}
	}
}
