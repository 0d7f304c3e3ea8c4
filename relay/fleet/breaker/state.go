package breaker

import (
	"fmt"
	"time"
)

// Phase is where a breaker is in its cycle.
type Phase string

// Phases. The zero Phase reads as closed: a breaker nobody wrote yet.
const (
	Closed   Phase = "closed"
	Open     Phase = "open"
	HalfOpen Phase = "half_open"
)

// State is one breaker, as stored in KV (wire.BreakerBucket) under its
// scope key, in JSON. The zero State is a closed breaker.
type State struct {
	Phase Phase `json:"phase,omitempty"`
	// Since is when the breaker entered Phase. For a closed breaker after
	// an outage it anchors the recovery window (Config.RecoveryJitter)
	// every node spreads its waiting calls over.
	Since time.Time `json:"since,omitzero"`
	// Trips counts the opens since the breaker last closed; the cooldown
	// doubles with each.
	Trips int `json:"trips,omitempty"`
	// Until is when an open breaker's cooldown ends.
	Until time.Time `json:"until,omitzero"`
	// Probe identifies the claim on the one probe of a half-open breaker;
	// empty while no one holds it. ProbeBy names the node that holds it,
	// and ProbeDeadline is when the claim expires.
	Probe         string    `json:"probe,omitempty"`
	ProbeBy       string    `json:"probe_by,omitempty"`
	ProbeDeadline time.Time `json:"probe_deadline,omitzero"`
	// By and Reason say who made the last transition, and why.
	By     string `json:"by,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// Current is s's phase, closed for the zero State.
func (s State) Current() Phase {
	if s.Phase == "" {
		return Closed
	}
	return s.Phase
}

// Verdict is what one call says about the provider's health.
type Verdict int

const (
	// Success: the provider finished the answer. A breaker also counts as
	// a success a call that streamed content before it was cut or stalled
	// (package fleet maps it): a provider that answers is up, and the
	// weather of long answers (a cut here, a stall there) is the retries'
	// business, not the breaker's.
	Success Verdict = iota
	// Failure: the provider or the network failed (transient errors, cuts,
	// stalls), or its credentials were refused even after a key change.
	// The only verdict a breaker counts against the provider, and only
	// when the call got no content at all.
	Failure
	// Neutral: the call ended for a reason that says nothing about the
	// provider: the request's own fault, a cancellation or shutdown, a
	// rejected key that the next key replaced, a rejected prefill that
	// prompt mode replaced, or a chunk log that refused the answer.
	Neutral
)

func (v Verdict) String() string {
	switch v {
	case Success:
		return "success"
	case Failure:
		return "failure"
	}
	return "neutral"
}

// Event is one transition, for the event handler that logs and counts
// them. Only the node whose write made the transition emits it.
type Event struct {
	At       time.Time
	Key      string
	From, To Phase
	By       string
	Reason   string
	// Cooldown is the new cooldown of a transition to open.
	Cooldown time.Duration
}

// String is the event's line in the event log (and its golden files).
func (e Event) String() string {
	s := fmt.Sprintf("%s %s %s->%s by %s: %s", e.At.UTC().Format("15:04:05.000"), e.Key, e.From, e.To, e.By, e.Reason)
	if e.Cooldown > 0 {
		s += fmt.Sprintf(" (cooldown %v)", e.Cooldown)
	}
	return s
}

// EventHandler receives every transition a node makes.
type EventHandler interface {
	OnEvent(Event)
}

// Trip opens a closed breaker: by's Tally says the provider is failing. It
// reports false, and leaves s alone, if the breaker is not closed: someone
// else tripped it first, or it is already recovering.
func Trip(s State, cfg Config, now time.Time, key, by, reason string) (State, Event, bool) {
	if s.Current() != Closed {
		return s, Event{}, false
	}
	cd := cfg.CooldownAfter(1)
	next := State{Phase: Open, Since: now, Trips: 1, Until: now.Add(cd), By: by, Reason: reason}
	return next, Event{At: now, Key: key, From: Closed, To: Open, By: by, Reason: reason, Cooldown: cd}, true
}

// ClaimableFor reports whether b has been claimable for grace: its probe
// is due and nobody claimed it, or a claim expired, grace ago.
func ClaimableFor(b State, now time.Time, grace time.Duration) bool {
	if !Claimable(b, now) {
		return false
	}
	switch b.Current() {
	case Open:
		return now.Sub(b.Until) >= grace
	case HalfOpen:
		if b.Probe != "" {
			return now.Sub(b.ProbeDeadline) >= grace
		}
		return now.Sub(b.Since) >= grace
	}
	return false
}

// Claimable reports whether a node may claim the probe now: the breaker is
// open and its cooldown is over, or half-open with no live claim.
func Claimable(s State, now time.Time) bool {
	switch s.Current() {
	case Open:
		return !now.Before(s.Until)
	case HalfOpen:
		return s.Probe == "" || !now.Before(s.ProbeDeadline)
	}
	return false
}

// Claim makes by the owner of the breaker's one probe, identified by id.
// It reports false unless Claimable.
func Claim(s State, cfg Config, now time.Time, key, by, id string) (State, Event, bool) {
	if !Claimable(s, now) {
		return s, Event{}, false
	}
	cfg = cfg.WithDefaults()
	from := s.Current()
	reason := "cooldown over; probe claimed"
	switch {
	case from == HalfOpen && s.Probe != "":
		reason = fmt.Sprintf("probe of %s expired; probe claimed", s.ProbeBy)
	case from == HalfOpen:
		reason = "probe released; probe claimed"
	}
	next := s
	next.Phase, next.Probe, next.ProbeBy, next.ProbeDeadline = HalfOpen, id, by, now.Add(cfg.ProbeTimeout)
	next.By, next.Reason = by, reason
	if from != HalfOpen {
		next.Since = now
	}
	next.Until = time.Time{}
	return next, Event{At: now, Key: key, From: from, To: HalfOpen, By: by, Reason: reason}, true
}

// Resolve applies the verdict of probe id. Success closes the breaker,
// Failure opens it again with the next, longer cooldown, Neutral releases
// the claim so that another call probes. It reports false if id no longer
// holds the probe (its claim expired and someone else took it).
func Resolve(s State, cfg Config, now time.Time, key, by, id string, v Verdict, reason string) (State, Event, bool) {
	if s.Current() != HalfOpen || s.Probe != id {
		return s, Event{}, false
	}
	switch v {
	case Success:
		next := State{Phase: Closed, Since: now, By: by, Reason: reason}
		return next, Event{At: now, Key: key, From: HalfOpen, To: Closed, By: by, Reason: reason}, true
	case Failure:
		cd := cfg.CooldownAfter(s.Trips + 1)
		next := State{Phase: Open, Since: now, Trips: s.Trips + 1, Until: now.Add(cd), By: by, Reason: reason}
		return next, Event{At: now, Key: key, From: HalfOpen, To: Open, By: by, Reason: reason, Cooldown: cd}, true
	}
	next := s
	next.Probe, next.ProbeBy, next.ProbeDeadline, next.By, next.Reason = "", "", time.Time{}, by, reason
	return next, Event{At: now, Key: key, From: HalfOpen, To: HalfOpen, By: by, Reason: reason}, true
}

// Decision is what a breaker says about a call now.
type Decision int

const (
	// Allow: the breaker is closed.
	Allow Decision = iota
	// Wait: open or probing; RetryAfter says for about how long.
	Wait
	// Probe: the call may claim the probe (Claim).
	Probe
)

// Decide is the hot-path question, asked of the local copy. With Wait,
// the duration is the time until the cooldown ends, or until a live
// probe's claim expires (an upper bound: its verdict usually comes first).
func Decide(s State, now time.Time) (Decision, time.Duration) {
	switch s.Current() {
	case Closed:
		return Allow, 0
	case Open:
		if now.Before(s.Until) {
			return Wait, s.Until.Sub(now)
		}
		return Probe, 0
	}
	if s.Probe == "" || !now.Before(s.ProbeDeadline) {
		return Probe, 0
	}
	return Wait, s.ProbeDeadline.Sub(now)
}

// Hint is the wait a client refused by s is told to come back after
// (Retry-After), Decide having said Wait for wait: an open breaker's whole
// cooldown, doubled by each failed probe, is what is known of its
// recovery; a probe's verdict usually comes long before its claim
// expires, so for one under way no more than the cooldown it was let
// through after.
func Hint(s State, cfg Config, wait time.Duration) time.Duration {
	if s.Current() == Open {
		return wait
	}
	return min(wait, cfg.CooldownAfter(max(s.Trips, 1)))
}

// Recovering reports whether a closed breaker is within jitter of its
// close after an outage, and the moment of that close: the anchor of the
// fleet's spread.
func Recovering(s State, now time.Time, jitter time.Duration) (time.Time, bool) {
	if s.Current() != Closed || s.Since.IsZero() || jitter <= 0 {
		return time.Time{}, false
	}
	return s.Since, now.Before(s.Since.Add(jitter))
}
