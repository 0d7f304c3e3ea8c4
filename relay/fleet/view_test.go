package fleet_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/relaydev/relay/relay/fleet"
	"github.com/relaydev/relay/relay/fleet/breaker"
	"github.com/relaydev/relay/relay/provider"
	"github.com/relaydev/relay/relay/relaytest"
	"github.com/relaydev/relay/relay/wire"
)

// The wait AllOpen hints (the fail-fast 503's Retry-After) is what the
// breakers say of the route's recovery: an open breaker's whole cooldown,
// however often failed probes doubled it, and for a probe in flight no
// more than the cooldown it was let through after.
func TestAllOpenHintsTheBreakersOwnWait(t *testing.T) {
	srv := relaytest.NATS(t)
	kv := bucket(t, srv, wire.BreakerBucket)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	v := &fleet.View{Breakers: fleet.NewTable[breaker.State](kv, relaytest.Logger(t))}
	go v.Breakers.Run(ctx)
	<-v.Breakers.Synced()

	now := time.Now()
	p := provider.Config{Name: "p", Models: []string{"m"}, Breaker: breaker.Config{Cooldown: 5 * time.Second}}
	route := []provider.Candidate{{Provider: p, Model: "m"}}
	key := wire.ScopeKey("p", "m")
	for _, tc := range []struct {
		name  string
		state breaker.State
		want  time.Duration
		open  bool
	}{
		{"closed", breaker.State{Phase: breaker.Closed}, 0, false},
		{"open, first trip", breaker.State{Phase: breaker.Open, Trips: 1, Until: now.Add(4 * time.Second)}, 4 * time.Second, true},
		{"open after failed probes", breaker.State{Phase: breaker.Open, Trips: 4, Until: now.Add(38 * time.Second)}, 38 * time.Second, true},
		{"probing after three trips", breaker.State{Phase: breaker.HalfOpen, Trips: 3, Probe: "x", ProbeDeadline: now.Add(2 * time.Minute)}, 20 * time.Second, true},
		{"probe claim about to expire", breaker.State{Phase: breaker.HalfOpen, Trips: 3, Probe: "x", ProbeDeadline: now.Add(time.Second)}, time.Second, true},
		{"cooldown over", breaker.State{Phase: breaker.Open, Trips: 2, Until: now.Add(-time.Second)}, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, _ := json.Marshal(tc.state)
			rev, err := kv.Put(ctx, key, b)
			if err != nil {
				t.Fatal(err)
			}
			relaytest.Eventually(t, 5*time.Second, time.Millisecond, func() bool {
				row, ok := v.Breakers.Get(key)
				return ok && row.Rev == rev
			})
			wait, open := v.AllOpen(route, now)
			if wait != tc.want || open != tc.open {
				t.Fatalf("AllOpen = %v, %v; want %v, %v", wait, open, tc.want, tc.open)
			}
		})
	}
}
