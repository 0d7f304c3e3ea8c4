package statusview

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/relaydev/relay/relay/fleet"
	"github.com/relaydev/relay/relay/fleet/breaker"
	"github.com/relaydev/relay/relay/fleet/canary"
	"github.com/relaydev/relay/relay/wire"
)

// providerVerdict is one provider's row of the view: the colour it gets
// and the reasons for it.
type providerVerdict struct {
	Provider string
	// State is wire.HealthGreen, HealthYellow or HealthRed.
	State string
	Why   []string
	// Health is the coordinator's probe, nil when none is stored (no
	// coordinator ran yet).
	Health *wire.Health
}

// providerVerdicts colours every provider st names, sorted by name, by
// the rules statusHelp states: red for an open breaker or red health;
// yellow for a half-open breaker, a pause, yellow health or a canary
// ramping onto the provider; green otherwise. Each reason that is not
// green is listed, so a row says why it is not green.
func providerVerdicts(st fleet.Status, now time.Time) []providerVerdict {
	byName := map[string]*providerVerdict{}
	get := func(provider string) *providerVerdict {
		v := byName[provider]
		if v == nil {
			v = &providerVerdict{Provider: provider, State: wire.HealthGreen}
			byName[provider] = v
		}
		return v
	}
	raise := func(v *providerVerdict, state, why string) {
		if s := severity(state); s > severity(v.State) {
			v.State = states[s]
		}
		v.Why = append(v.Why, why)
	}
	for i := range st.Health {
		h := &st.Health[i]
		v := get(h.Provider)
		v.Health = h
		if h.State != wire.HealthGreen {
			raise(v, h.State, "health "+h.State)
		}
	}
	for _, b := range st.Breakers {
		v := get(b.Provider)
		switch b.Phase {
		case breaker.Open:
			raise(v, wire.HealthRed, scopeWhy(b.Model, "breaker open"))
		case breaker.HalfOpen:
			raise(v, wire.HealthYellow, scopeWhy(b.Model, "breaker half-open"))
		}
	}
	for _, p := range st.Pauses {
		v := get(p.Provider)
		if p.Until.After(now) {
			raise(v, wire.HealthYellow, scopeWhy(p.Model, "paused for "+p.Until.Sub(now).Round(100*time.Millisecond).String()))
		}
	}
	for _, c := range st.Canaries {
		v := get(c.Provider)
		if c.Phase == canary.Ramping {
			raise(v, wire.HealthYellow, fmt.Sprintf("canary of %s at %v%%", c.Model, c.Weight))
		}
	}
	out := make([]providerVerdict, 0, len(byName))
	for _, v := range byName {
		out = append(out, *v)
	}
	slices.SortFunc(out, func(a, b providerVerdict) int { return strings.Compare(a.Provider, b.Provider) })
	return out
}

// states are the provider states, by severity.
var states = [...]string{wire.HealthGreen, wire.HealthYellow, wire.HealthRed}

// severity orders the states; one the view does not know counts as red,
// so that it is not taken for healthy.
func severity(state string) int {
	switch state {
	case wire.HealthGreen:
		return 0
	case wire.HealthYellow:
		return 1
	}
	return 2
}

// scopeWhy prefixes why with the model it is about, if any.
func scopeWhy(model, why string) string {
	if model == "" {
		return why
	}
	return model + " " + why
}
