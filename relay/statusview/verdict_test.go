package statusview

import (
	"slices"
	"testing"
	"time"

	"github.com/relaydev/relay/relay/fleet"
	"github.com/relaydev/relay/relay/fleet/breaker"
	"github.com/relaydev/relay/relay/fleet/canary"
	"github.com/relaydev/relay/relay/wire"
)

// A provider is green with closed breakers and green health; yellow with
// a half-open breaker, a pause, yellow health or a canary ramping onto
// it; red with an open breaker (its own or a model's) or red health. The
// worst reason wins and every reason is listed.
func TestProviderVerdicts(t *testing.T) {
	now := time.Now()
	health := func(provider, state string) wire.Health { return wire.Health{Provider: provider, State: state} }
	brk := func(provider, model string, phase breaker.Phase) fleet.BreakerStatus {
		return fleet.BreakerStatus{Provider: provider, Model: model, State: breaker.State{Phase: phase}}
	}
	pause := func(provider string, until time.Time) fleet.PauseStatus {
		return fleet.PauseStatus{Provider: provider, Pause: wire.Pause{Until: until}}
	}
	for _, tc := range []struct {
		name      string
		st        fleet.Status
		state     string
		why       []string
		hasHealth bool
	}{
		{"healthy", fleet.Status{Health: []wire.Health{health("p", wire.HealthGreen)}, Breakers: []fleet.BreakerStatus{brk("p", "", breaker.Closed)}},
			wire.HealthGreen, nil, true},
		{"half-open", fleet.Status{Health: []wire.Health{health("p", wire.HealthGreen)}, Breakers: []fleet.BreakerStatus{brk("p", "", breaker.HalfOpen)}},
			wire.HealthYellow, []string{"breaker half-open"}, true},
		{"paused", fleet.Status{Pauses: []fleet.PauseStatus{pause("p", now.Add(3*time.Second))}},
			wire.HealthYellow, []string{"paused for 3s"}, false},
		{"pause over", fleet.Status{Pauses: []fleet.PauseStatus{pause("p", now.Add(-time.Second))}},
			wire.HealthGreen, nil, false},
		{"degraded", fleet.Status{Health: []wire.Health{health("p", wire.HealthYellow)}},
			wire.HealthYellow, []string{"health yellow"}, true},
		{"canary ramping", fleet.Status{Canaries: []canary.State{{Model: "m", Provider: "p", Phase: canary.Ramping, Weight: 10}}},
			wire.HealthYellow, []string{"canary of m at 10%"}, false},
		{"canary done", fleet.Status{Canaries: []canary.State{{Model: "m", Provider: "p", Phase: canary.Done, Weight: 50}}},
			wire.HealthGreen, nil, false},
		{"a model's breaker open", fleet.Status{Breakers: []fleet.BreakerStatus{brk("p", "m", breaker.Open), brk("p", "n", breaker.HalfOpen)}},
			wire.HealthRed, []string{"m breaker open", "n breaker half-open"}, false},
		{"down", fleet.Status{Health: []wire.Health{health("p", wire.HealthRed)}, Pauses: []fleet.PauseStatus{pause("p", now.Add(time.Second))}},
			wire.HealthRed, []string{"health red", "paused for 1s"}, true},
		{"unknown health", fleet.Status{Health: []wire.Health{health("p", "purple")}},
			wire.HealthRed, []string{"health purple"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := providerVerdicts(tc.st, now)
			if len(got) != 1 {
				t.Fatalf("%d rows, want 1: %+v", len(got), got)
			}
			v := got[0]
			if v.Provider != "p" || v.State != tc.state || !slices.Equal(v.Why, tc.why) || (v.Health != nil) != tc.hasHealth {
				t.Errorf("got %s %s %q (health %v); want %s %q (health %v)", v.Provider, v.State, v.Why, v.Health, tc.state, tc.why, tc.hasHealth)
			}
		})
	}
}

// Every provider named anywhere gets a row, sorted by name.
func TestProviderVerdictsListEveryProvider(t *testing.T) {
	st := fleet.Status{
		Health:   []wire.Health{{Provider: "b", State: wire.HealthGreen}},
		Breakers: []fleet.BreakerStatus{{Provider: "c", State: breaker.State{Phase: breaker.Open}}},
		Canaries: []canary.State{{Model: "m", Provider: "a", Phase: canary.Ramping}},
	}
	var names []string
	for _, v := range providerVerdicts(st, time.Now()) {
		names = append(names, v.Provider+":"+v.State)
	}
	if want := []string{"a:yellow", "b:green", "c:red"}; !slices.Equal(names, want) {
		t.Errorf("rows %v, want %v", names, want)
	}
}
