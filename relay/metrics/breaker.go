package metrics

import (
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/relaydev/relay/relay/fleet/breaker"
	"github.com/relaydev/relay/relay/wire"
)

// AllModels is the model label of a breaker that covers a whole provider.
const AllModels = "all"

// Breaker holds the circuit breakers' families. It is a
// breaker.EventHandler: hand it to the role that makes transitions, which
// then counts each one; Set records a state learnt otherwise.
type Breaker struct {
	names       Names
	state       *prometheus.GaugeVec
	transitions *prometheus.CounterVec
	probeAt     *prometheus.GaugeVec
}

// NewBreaker registers the breaker families with reg (nil: a private
// registry).
func NewBreaker(reg prometheus.Registerer, names Names) (*Breaker, error) {
	r := newRegistrar(reg)
	m := &Breaker{
		names: names,
		state: gaugeVec(r, "relay_breaker_state",
			"1 for the state each breaker is in (closed, open, half_open), 0 for the others; model is \"all\" for a provider-wide breaker.",
			"provider", "model", "state"),
		transitions: counterVec(r, "relay_breaker_transitions_total",
			"Breaker state changes made by this process.",
			"provider", "model", "from", "to"),
		probeAt: gaugeVec(r, "relay_breaker_next_probe_timestamp_seconds",
			"Unix time at which an open breaker lets its half-open probe through; 0 when it is not open.",
			"provider", "model"),
	}
	if r.err != nil {
		return nil, r.err
	}
	return m, nil
}

func (m *Breaker) labels(provider, model string) (string, string) {
	if model == "" {
		return m.names.Provider(provider), AllModels
	}
	return m.names.Provider(provider), m.names.Model(model)
}

// Set records the state of the breaker of model on provider (model "":
// the provider's) without counting a transition; probeAt is when an open
// breaker probes, zero otherwise.
func (m *Breaker) Set(provider, model string, s BreakerState, probeAt time.Time) {
	p, mo := m.labels(provider, model)
	for _, st := range BreakerStates {
		v := 0.0
		if st == s {
			v = 1
		}
		m.state.WithLabelValues(p, mo, string(st)).Set(v)
	}
	at := 0.0
	if s == BreakerOpen && !probeAt.IsZero() {
		at = float64(probeAt.UnixMilli()) / 1e3
	}
	m.probeAt.WithLabelValues(p, mo).Set(at)
}

// Transition counts a state change and records the new state.
func (m *Breaker) Transition(provider, model string, from, to BreakerState, probeAt time.Time) {
	p, mo := m.labels(provider, model)
	m.transitions.WithLabelValues(p, mo, string(from), string(to)).Inc()
	m.Set(provider, model, to, probeAt)
}

// OnEvent counts a breaker's transition (breaker.EventHandler).
func (m *Breaker) OnEvent(e breaker.Event) {
	provider, model := ParseScopeKey(e.Key)
	var probeAt time.Time
	if e.To == breaker.Open {
		probeAt = e.At.Add(e.Cooldown)
	}
	m.Transition(provider, model, BreakerStateOf(e.From), BreakerStateOf(e.To), probeAt)
}

// BreakerStateOf maps a breaker phase; the zero phase is closed.
func BreakerStateOf(p breaker.Phase) BreakerState {
	switch p {
	case breaker.Open:
		return BreakerOpen
	case breaker.HalfOpen:
		return BreakerHalfOpen
	}
	return BreakerClosed
}

// ParseScopeKey undoes wire.ScopeKey: "provider" or "provider.model".
// An undecodable token comes back as it is, and Names then counts it as
// "other".
func ParseScopeKey(key string) (provider, model string) {
	p, m, _ := strings.Cut(key, ".")
	provider, model = p, m
	if s, err := wire.ParseKeyToken(p); err == nil {
		provider = s
	}
	if m != "" {
		if s, err := wire.ParseKeyToken(m); err == nil {
			model = s
		}
	}
	return provider, model
}

var _ breaker.EventHandler = (*Breaker)(nil)
