package apikeys

import (
	"context"
	"sync"
	"time"

	"github.com/relaydev/relay/relay/backoff"
)

// DefaultCheckTimeout bounds one check of a key.
const DefaultCheckTimeout = 10 * time.Second

// defaultRecheck spaces the checks of keys that could not be told (the
// provider down): from a second up to a minute, so a long outage costs a
// call a minute per key.
var defaultRecheck = backoff.Config{Base: time.Second, Cap: time.Minute}

// Verifier checks the pending keys of a ring: at once when it starts, when
// keys are added or a recheck is asked, and with backoff while some could
// not be told.
type Verifier struct {
	// Backoff spaces the rounds while keys stay pending; zero: from 1s
	// to 1m, with jitter.
	Backoff backoff.Backoff
	// Timeout bounds one check; zero: DefaultCheckTimeout.
	Timeout time.Duration

	ring   *Ring
	check  func(ctx context.Context, key string) Result
	report func(st KeyStatus, before State)

	readyOnce sync.Once
	ready     chan struct{}
}

// NewVerifier returns a verifier of ring's keys that checks a key with
// check (Check, bound to the provider) and tells report every result, with
// the state the key's previous check found ("" for none), so the owner
// logs and counts them.
func NewVerifier(ring *Ring, check func(ctx context.Context, key string) Result, report func(st KeyStatus, before State)) *Verifier {
	return &Verifier{Backoff: backoff.Backoff{Config: defaultRecheck}, ring: ring, check: check, report: report, ready: make(chan struct{})}
}

// Ready is closed once every key present at start was checked once (or
// Run returned): a worker waits for it, within a bound, before it takes
// traffic, so a key the provider refuses is not used by the first calls.
func (v *Verifier) Ready() <-chan struct{} { return v.ready }

// Run checks keys until ctx ends.
func (v *Verifier) Run(ctx context.Context) {
	defer v.markReady()
	for n := 0; ; {
		left := v.round(ctx)
		v.markReady()
		var retry <-chan time.Time
		if left {
			retry = time.After(v.Backoff.Delay(n, 0))
			n++
		}
		select {
		case <-ctx.Done():
			return
		case <-v.ring.changed:
			n = 0
		case <-retry:
		}
	}
}

func (v *Verifier) markReady() { v.readyOnce.Do(func() { close(v.ready) }) }

// round checks every pending key once and reports whether some are still
// pending.
func (v *Verifier) round(ctx context.Context) bool {
	timeout := v.Timeout
	if timeout <= 0 {
		timeout = DefaultCheckTimeout
	}
	for _, key := range v.ring.pending() {
		cctx, cancel := context.WithTimeout(ctx, timeout)
		res := v.check(cctx, key)
		cancel()
		if ctx.Err() != nil {
			return false
		}
		if st, before, ok := v.ring.record(key, res); ok && v.report != nil {
			v.report(st, before)
		}
	}
	return len(v.ring.pending()) > 0
}
