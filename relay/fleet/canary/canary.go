// Package canary is the pure state machine of canary routing: a model's
// route sends a share of its requests (the weight) to a canary provider
// first, and the weight ramps through configured steps, each held for an
// interval, unless the canary's calls or its clients' streams fail more
// often than a threshold, which aborts the ramp: weight 0.
//
// The active coordinator drives the ramp (Next) from the counts the
// workers report: the canary's upstream calls, and the streams it was
// given, by how they ended for their clients. It writes the state to KV
// (wire.CanaryBucket) with a revision check; every worker follows it
// through a watch and picks by weight (Pick), a pure function of the
// stream id, so every worker, and a worker that takes a stream over, makes
// the same choice for a request.
package canary

import (
	"errors"
	"fmt"
	"hash/fnv"
	"strings"
	"time"
)

// Defaults of the zero Config.
var DefaultSteps = []float64{1, 10, 50, 100}

const (
	DefaultHold         = 10 * time.Minute
	DefaultMaxErrorRate = 0.005
	DefaultMinSample    = 200
)

// Config is a model's `canary` section.
type Config struct {
	// Provider is the canary: a provider that serves the model. Required.
	Provider string `koanf:"provider"`
	// Steps are the weights, in percent of the model's requests, the
	// canary ramps through, increasing, each in (0, 100]. Zero: 1, 10, 50,
	// 100. A single step is a fixed split by weight.
	Steps []float64 `koanf:"steps"`
	// Hold is how long each step lasts at least: the next comes once the
	// step was held this long and took MinSample canary calls. Zero: 10m.
	Hold time.Duration `koanf:"hold"`
	// MaxErrorRate aborts the ramp when, in the current step, the share
	// of the canary's calls that failed (or were refused by its breaker),
	// or the share of its streams that ended failed or incomplete for the
	// client, goes over it. Zero: 0.005 (0.5%).
	MaxErrorRate float64 `koanf:"max_error_rate"`
	// MinSample is how many canary calls a step needs before their
	// failure rate can abort the ramp or the step can end, and how many
	// canary streams before theirs can abort it. Zero: 200.
	MinSample int `koanf:"min_sample"`
}

// Validate names the first invalid field under prefix.
func (c Config) Validate(prefix string) error {
	if c.Provider == "" {
		return fmt.Errorf("%s.provider: required", prefix)
	}
	prev := 0.0
	for i, s := range c.Steps {
		if s <= prev || s > 100 {
			return fmt.Errorf("%s.steps[%d]: %v is not above the previous step and at most 100", prefix, i, s)
		}
		prev = s
	}
	switch {
	case c.Hold < 0:
		return fmt.Errorf("%s.hold: must not be negative", prefix)
	case c.MaxErrorRate < 0 || c.MaxErrorRate >= 1:
		return fmt.Errorf("%s.max_error_rate: %v is not in [0, 1)", prefix, c.MaxErrorRate)
	case c.MinSample < 0:
		return fmt.Errorf("%s.min_sample: must not be negative", prefix)
	}
	return nil
}

// WithDefaults fills the zero fields.
func (c Config) WithDefaults() Config {
	if len(c.Steps) == 0 {
		c.Steps = DefaultSteps
	}
	if c.Hold == 0 {
		c.Hold = DefaultHold
	}
	if c.MaxErrorRate == 0 {
		c.MaxErrorRate = DefaultMaxErrorRate
	}
	if c.MinSample == 0 {
		c.MinSample = DefaultMinSample
	}
	return c
}

// Plan identifies a configuration: a ramp whose plan changed starts over.
func (c Config) Plan() string {
	c = c.WithDefaults()
	steps := make([]string, len(c.Steps))
	for i, s := range c.Steps {
		steps[i] = fmt.Sprint(s)
	}
	return fmt.Sprintf("%s@%s/%v/%v/%d", c.Provider, strings.Join(steps, ","), c.Hold, c.MaxErrorRate, c.MinSample)
}

// Phase of a ramp.
type Phase string

const (
	Ramping Phase = "ramping"
	// Done: the last step was held; its weight stays.
	Done Phase = "done"
	// Aborted: the error rate went over the threshold; the weight is 0
	// until the plan changes.
	Aborted Phase = "aborted"
)

// Counts are the canary's calls and streams, cumulative over the fleet.
// The two are judged apart: a failed call is often rescued by a fallback
// that the client never notices, and a stream can fail its client on
// calls that all succeeded at the HTTP level (a provider that rejects what
// the others take).
type Counts struct {
	// Calls went to the canary (or were refused by its breaker); Errors
	// of them failed.
	Calls  int64 `json:"calls"`
	Errors int64 `json:"errors"`
	// Streams are the streams routed to the canary first that ended, the
	// ones their clients cancelled aside; Failed of them ended failed or
	// incomplete on the canary.
	Streams int64 `json:"streams,omitempty"`
	Failed  int64 `json:"failed,omitempty"`
}

// minus is c since b.
func (c Counts) minus(b Counts) Counts {
	return Counts{Calls: c.Calls - b.Calls, Errors: c.Errors - b.Errors, Streams: c.Streams - b.Streams, Failed: c.Failed - b.Failed}
}

// below reports whether any count of c is lower than b's.
func (c Counts) below(b Counts) bool {
	return c.Calls < b.Calls || c.Errors < b.Errors || c.Streams < b.Streams || c.Failed < b.Failed
}

// String gives both figures with their counts.
func (c Counts) String() string {
	return fmt.Sprintf("upstream calls %s failed, client streams %s failed or incomplete", ratio(c.Errors, c.Calls), ratio(c.Failed, c.Streams))
}

func ratio(n, of int64) string {
	if of == 0 {
		return fmt.Sprintf("%d/0", n)
	}
	return fmt.Sprintf("%d/%d (%.2f%%)", n, of, 100*float64(n)/float64(of))
}

// State is one model's ramp, as stored in KV under the model's key.
type State struct {
	Model    string    `json:"model"`
	Provider string    `json:"provider"`
	Plan     string    `json:"plan"`
	Phase    Phase     `json:"phase"`
	Step     int       `json:"step"`
	Weight   float64   `json:"weight"`
	Since    time.Time `json:"since"`
	// Base is the fleet's counts when the step began; Seen the latest.
	Base   Counts `json:"base"`
	Seen   Counts `json:"seen"`
	Reason string `json:"reason,omitempty"`
}

// StepCounts are the canary's calls and streams in the current step.
func (s State) StepCounts() Counts { return s.Seen.minus(s.Base) }

// Event is a ramp transition, logged by the coordinator.
type Event struct {
	At       time.Time
	Model    string
	From, To float64 // weights
	Phase    Phase
	Reason   string
	// Step are the counts of the step that ended, on which it was judged.
	Step Counts
}

func (e Event) String() string {
	return fmt.Sprintf("%s canary %s: weight %v%% -> %v%% (%s; %s): %s",
		e.At.UTC().Format("15:04:05.000"), e.Model, e.From, e.To, e.Phase, e.Step, e.Reason)
}

// ErrNoChange is returned by Next when the state stays as it is.
var ErrNoChange = errors.New("canary: no change")

// Next is the ramp's next state at now, given the fleet's cumulative
// counts of canary calls and streams. It starts a new ramp (or restarts
// one whose plan changed), aborts one whose step's call failure rate, or
// stream failure rate, is over the threshold (each over at least
// MinSample of its own), and moves on to the next step once a step
// was held for Hold and took MinSample canary calls. It returns ErrNoChange when only the counts moved
// less than is worth a write (the caller then keeps the stored state).
func Next(s State, cfg Config, model string, now time.Time, total Counts) (State, *Event, error) {
	cfg = cfg.WithDefaults()
	plan := cfg.Plan()
	if s.Plan != plan {
		next := State{Model: model, Provider: cfg.Provider, Plan: plan, Phase: Ramping, Weight: cfg.Steps[0], Since: now, Base: total, Seen: total}
		reason := "ramp started"
		if s.Plan != "" {
			reason = "plan changed; ramp restarted"
		}
		return next, &Event{At: now, Model: model, From: s.Weight, To: next.Weight, Phase: Ramping, Reason: reason}, nil
	}
	if s.Phase != Ramping {
		return s, nil, ErrNoChange
	}
	if total.below(s.Base) {
		// The counts went back (a coordinator restarted with fresh
		// totals): the step starts counting again.
		s.Base = total
	}
	s.Seen = total
	c := s.StepCounts()
	if over := cfg.breaches(c); over != "" {
		from := s.Weight
		s.Phase, s.Weight, s.Since = Aborted, 0, now
		s.Reason = fmt.Sprintf("%s at %v%%", over, from)
		return s, &Event{At: now, Model: model, From: from, To: 0, Phase: Aborted, Reason: s.Reason, Step: c}, nil
	}
	if now.Sub(s.Since) < cfg.Hold {
		return s, nil, nil
	}
	if c.Calls < int64(cfg.MinSample) {
		// Time alone proves nothing: a step moves on once the canary
		// took enough calls to be judged, however long that takes.
		s.Reason = fmt.Sprintf("step held %v; waiting for %d canary calls (%d so far)", cfg.Hold, cfg.MinSample, c.Calls)
		return s, nil, nil
	}
	from := s.Weight
	if s.Step+1 >= len(cfg.Steps) {
		s.Phase, s.Since, s.Reason = Done, now, "last step held"
		return s, &Event{At: now, Model: model, From: from, To: from, Phase: Done, Reason: s.Reason, Step: c}, nil
	}
	s.Step++
	s.Weight, s.Since, s.Base, s.Reason = cfg.Steps[s.Step], now, total, fmt.Sprintf("step held %v", cfg.Hold)
	return s, &Event{At: now, Model: model, From: from, To: s.Weight, Phase: Ramping, Reason: s.Reason, Step: c}, nil
}

// breaches names the failure rates of a step's counts that are over the
// threshold, "" if none is. A rate is judged only over MinSample of its
// own: a step of many calls may hold few streams.
func (cfg Config) breaches(c Counts) string {
	var over []string
	judge := func(what string, failed, of int64) {
		if of > 0 && of >= int64(cfg.MinSample) && float64(failed)/float64(of) > cfg.MaxErrorRate {
			over = append(over, fmt.Sprintf("%s %.2f%% over %.2f%%", what, 100*float64(failed)/float64(of), 100*cfg.MaxErrorRate))
		}
	}
	judge("upstream call failure rate", c.Errors, c.Calls)
	judge("client-visible stream failure rate", c.Failed, c.Streams)
	return strings.Join(over, " and ")
}

// Pick reports whether the request with streamID goes to the canary at
// weight percent: a hash of the id below the weight, so every worker picks
// the same for a request, and a raised weight keeps the requests a lower
// one picked.
func Pick(streamID string, weight float64) bool {
	if weight <= 0 {
		return false
	}
	if weight >= 100 {
		return true
	}
	h := fnv.New64a()
	h.Write([]byte(streamID))
	return float64(h.Sum64()%1_000_000) < weight*10_000
}
