package fleet

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/relaydev/relay/relay/fleet/breaker"
	"github.com/relaydev/relay/relay/provider"
	"github.com/relaydev/relay/relay/relaytest"
	"github.com/relaydev/relay/relay/wire"
)

// waiting is how many calls stand in scope's line.
func (g *SharedGate) waiting(scope string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.scope(scope).line.waiting)
}

// A pause is a queue: calls that come during it wait, and when it ends
// they go in the order they came, spread over the recovery window after
// its end.
func TestSharedGatePauseIsAQueue(t *testing.T) {
	const pause, window = 400 * time.Millisecond, 600 * time.Millisecond
	g, js := sharedGate(t, provider.Config{Breaker: breaker.Config{RecoveryJitter: window}})
	until := time.Now().Add(pause)
	putState(t, js, wire.PauseBucket, pm, wire.Pause{Until: until.UTC(), RetryAfterMS: pause.Milliseconds(), By: "test"})
	relaytest.Eventually(t, time.Second, 5*time.Millisecond, func() bool {
		row, ok := g.view.Pauses.Get(pm)
		return ok && row.Value.Until.Equal(until.UTC())
	})

	const n = 4
	went := make([]chan time.Time, n)
	for i := range n {
		went[i] = make(chan time.Time, 1)
		go func() {
			tk, err := g.Admit(context.Background(), "p", "m")
			if err != nil {
				t.Errorf("call %d waited and was refused: %v", i, err)
				went[i] <- time.Time{}
				return
			}
			went[i] <- time.Now()
			tk.Done(Report{Verdict: breaker.Success})
		}()
		// The next call comes once this one stands in the line.
		relaytest.Eventually(t, time.Second, time.Millisecond, func() bool { return g.waiting(pm) == i+1 })
	}

	var last time.Time
	for i := range n {
		at := <-went[i]
		switch {
		case at.IsZero():
			t.FailNow()
		case at.Before(until):
			t.Fatalf("call %d went %v before the pause ended", i, until.Sub(at))
		case at.After(until.Add(window + 200*time.Millisecond)):
			t.Fatalf("call %d went %v after the pause ended, past the %v window", i, at.Sub(until), window)
		case at.Before(last):
			t.Fatalf("call %d went before call %d, which came earlier", i, i-1)
		}
		last = at
	}
	if g.waiting(pm) != 0 {
		t.Fatalf("%d calls still in the line", g.waiting(pm))
	}
}

// A call whose bound (breaker.max_wait) ends before the pause does is
// refused at once, with the provider's name and the wait.
func TestSharedGateRefusesWhatItCannotOutwait(t *testing.T) {
	g, js := sharedGate(t, provider.Config{Breaker: breaker.Config{MaxWait: 10 * time.Second}})
	until := time.Now().Add(time.Minute)
	putState(t, js, wire.PauseBucket, pm, wire.Pause{Until: until.UTC(), RetryAfterMS: time.Minute.Milliseconds(), By: "test"})
	relaytest.Eventually(t, time.Second, 5*time.Millisecond, func() bool {
		_, ok := g.view.Pauses.Get(pm)
		return ok
	})
	start := time.Now()
	_, err := g.Admit(context.Background(), "p", "m")
	var ue *UnavailableError
	if !errors.Is(err, ErrProviderPaused) || !errors.As(err, &ue) || ue.Provider != "p" || ue.RetryAfter < 50*time.Second {
		t.Fatalf("a call whose bound ends before the pause: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("refused after %v: it waited for its bound", d)
	}
}
