package breaker

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// store is a one-key KV with revisions: what package fleet gives the
// breaker, reduced to the compare-and-swap contract.
type store struct {
	mu    sync.Mutex
	state State
	rev   uint64
}

func (s *store) read() (State, uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state, s.rev
}

// update writes next if rev is still current.
func (s *store) update(next State, rev uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if rev != s.rev {
		return false
	}
	s.state, s.rev = next, s.rev+1
	return true
}

// node is one worker's view: it reads, computes with the pure functions,
// and writes back with a revision check, as relay's gate does.
type node struct {
	name  string
	cfg   Config
	st    *store
	tally Tally
	log   func(Event)
}

func (n *node) transition(f func(State) (State, Event, bool)) bool {
	for range 3 {
		s, rev := n.st.read()
		next, ev, ok := f(s)
		if !ok {
			return false
		}
		if n.st.update(next, rev) {
			n.log(ev)
			return true
		}
	}
	return false
}

func (n *node) report(v Verdict) {
	if trip, why := n.tally.Observe(v, time.Now(), n.cfg); trip {
		n.tally.Reset()
		n.transition(func(s State) (State, Event, bool) {
			return Trip(s, n.cfg, time.Now(), "mock", n.name, why)
		})
	}
}

func (n *node) claim(id string) bool {
	return n.transition(func(s State) (State, Event, bool) {
		return Claim(s, n.cfg, time.Now(), "mock", n.name, id)
	})
}

func (n *node) resolve(id string, v Verdict, reason string) bool {
	return n.transition(func(s State) (State, Event, bool) {
		return Resolve(s, n.cfg, time.Now(), "mock", n.name, id, v, reason)
	})
}

func (n *node) decide() (Decision, time.Duration) {
	s, _ := n.st.read()
	return Decide(s, time.Now())
}

// TestEventLog runs one breaker through a whole outage on three nodes under
// a fake clock and compares the transitions with the golden event log.
func TestEventLog(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var lines []string
		start := time.Now()
		logEvent := func(e Event) {
			e.At = time.Unix(0, 0).Add(e.At.Sub(start)) // relative, for the golden file
			lines = append(lines, e.String())
		}
		cfg := Config{Failures: 3, Cooldown: 30 * time.Second, MaxCooldown: 50 * time.Second, ProbeTimeout: time.Minute}.WithDefaults()
		st := &store{}
		w1 := &node{name: "w1", cfg: cfg, st: st, log: logEvent}
		w2 := &node{name: "w2", cfg: cfg, st: st, log: logEvent}
		w3 := &node{name: "w3", cfg: cfg, st: st, log: logEvent}

		// Two failures, a success, then three failures: only a streak trips.
		for _, v := range []Verdict{Failure, Failure, Success, Failure, Neutral, Failure} {
			w1.report(v)
		}
		if d, _ := w2.decide(); d != Allow {
			t.Fatalf("tripped early: %v", d)
		}
		w1.report(Failure)
		// w2 learned nothing itself, but the shared state is open.
		time.Sleep(10 * time.Second)
		if d, wait := w2.decide(); d != Wait || wait != 20*time.Second {
			t.Fatalf("decide = %v %v, want wait 20s", d, wait)
		}
		// A late failure on w3 does not trip an open breaker again.
		for range 3 {
			w3.report(Failure)
		}

		time.Sleep(20 * time.Second)
		// w2 and w3 both read the same revision and race for the probe:
		// exactly one claim is written.
		s, rev := st.read()
		n2, e2, ok2 := Claim(s, cfg, time.Now(), "mock", "w2", "p1")
		n3, _, ok3 := Claim(s, cfg, time.Now(), "mock", "w3", "p2")
		if !ok2 || !ok3 {
			t.Fatal("cooldown over, but not claimable")
		}
		if !st.update(n2, rev) {
			t.Fatal("first claim refused")
		}
		logEvent(e2)
		if st.update(n3, rev) {
			t.Fatal("second claim on the same revision accepted")
		}
		if w3.claim("p2") {
			t.Fatal("w3 claimed a live probe")
		}
		if d, _ := w3.decide(); d != Wait {
			t.Fatalf("w3 decides %v during w2's probe", d)
		}
		time.Sleep(2 * time.Second)
		w2.resolve("p1", Failure, "probe failed: 503")

		// Cooldown doubled: 60s, capped at 50s.
		time.Sleep(49 * time.Second)
		if w3.claim("p3") {
			t.Fatal("claimed before the longer cooldown ended")
		}
		time.Sleep(time.Second)
		if !w3.claim("p3") {
			t.Fatal("no claim after the cooldown")
		}
		// Its client went away: the claim is released for the next call.
		w3.resolve("p3", Neutral, "probe cancelled by its client")
		if !w1.claim("p4") {
			t.Fatal("released probe not claimable")
		}
		// w1 dies with the probe; after ProbeTimeout w2 takes over.
		time.Sleep(59 * time.Second)
		if w2.claim("p5") {
			t.Fatal("claimed a live probe")
		}
		time.Sleep(time.Second)
		if !w2.claim("p5") {
			t.Fatal("expired probe not claimable")
		}
		// The dead owner's late verdict changes nothing.
		if w1.resolve("p4", Success, "late") {
			t.Fatal("expired claim resolved the breaker")
		}
		time.Sleep(500 * time.Millisecond)
		w2.resolve("p5", Success, "probe succeeded")

		end, _ := st.read()
		if since, ok := Recovering(end, time.Now().Add(time.Second), 5*time.Second); !ok || !since.Equal(time.Now()) {
			t.Fatalf("not recovering after the close: %v %v", since, ok)
		}
		if _, ok := Recovering(end, time.Now().Add(5*time.Second), 5*time.Second); ok {
			t.Fatal("still recovering after the jitter window")
		}
		golden(t, "outage.log", strings.Join(lines, "\n")+"\n")
	})
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("event log differs from %s:\n--- got\n%s--- want\n%s", path, got, want)
	}
}

func TestCooldownGrowsToTheCap(t *testing.T) {
	cfg := Config{Cooldown: time.Second, MaxCooldown: 10 * time.Second}
	var got []time.Duration
	for trips := 1; trips <= 6; trips++ {
		got = append(got, cfg.CooldownAfter(trips))
	}
	want := []time.Duration{1, 2, 4, 8, 10, 10}
	for i := range want {
		if got[i] != want[i]*time.Second {
			t.Fatalf("cooldowns %v, want %v s", got, want)
		}
	}
	if d := (Config{}).CooldownAfter(1 << 20); d != DefaultMaxCooldown {
		t.Fatalf("huge trips: %v", d)
	}
}

func TestTallyFailuresInARow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := Config{Failures: 3}
		var tl Tally
		for i, v := range []Verdict{Failure, Failure, Neutral, Success, Failure, Failure} {
			if trip, _ := tl.Observe(v, time.Now(), cfg); trip {
				t.Fatalf("tripped at %d", i)
			}
		}
		if trip, why := tl.Observe(Failure, time.Now(), cfg); !trip || why != "3 failures in a row" {
			t.Fatalf("three in a row: %v %q", trip, why)
		}
		tl.Reset()
		for range 10 {
			if trip, _ := tl.Observe(Failure, time.Now(), Config{Failures: -1}); trip {
				t.Fatal("a disabled breaker tripped")
			}
		}
	})
}

// The default rule opens on an outage within a few calls, also on a
// worker whose window is full of successes.
func TestTallyDefaultsOpenOnAnOutage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var tl Tally
		for range 100 {
			tl.Observe(Success, time.Now(), Config{})
			time.Sleep(100 * time.Millisecond)
		}
		for i := 1; ; i++ {
			trip, why := tl.Observe(Failure, time.Now(), Config{})
			if trip {
				if i != DefaultFailures {
					t.Fatalf("tripped after %d failures (%s), want %d", i, why, DefaultFailures)
				}
				break
			}
			if i > DefaultFailures {
				t.Fatal("an outage did not trip")
			}
		}
	})
}

// Weather: 5% of the calls cut before any content and 5% stalled before
// the first byte (the cuts and stalls after content count as successes),
// at one call every 50ms over ten minutes, in a fixed pattern with the odd
// pair in a row. The default breaker never opens. Then a provider failing
// 60% of calls, never 5 in a row: the ratio opens it. The event log is
// the golden weather.log: one trip, by the ratio, none before.
func TestTallyWeatherVersusFailingProvider(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var lines []string
		start := time.Now()
		st := &store{}
		w1 := &node{name: "w1", cfg: Config{}, st: st, log: func(e Event) {
			e.At = time.Unix(0, 0).Add(e.At.Sub(start))
			lines = append(lines, e.String())
		}}
		// Two failures in a row every 40 calls and two more apart, 10% in
		// all.
		for i := range 12000 {
			v := Success
			switch i % 40 {
			case 7, 8, 27, 33:
				v = Failure
			}
			w1.report(v)
			time.Sleep(50 * time.Millisecond)
		}
		if len(lines) > 0 {
			t.Fatalf("weather tripped the breaker: %v", lines)
		}
		s, f, _ := w1.tally.Counts(time.Now(), w1.cfg)
		if n := s + f; n < 540 || n > 600 || f*10 != n {
			t.Fatalf("window holds %d successes and %d failures, want about 600 calls, 10%% failed", s, f)
		}
		// 3 failures of every 5 calls: F F S F S ...
		for i := 0; len(lines) == 0; i++ {
			v := Success
			if i%5 == 0 || i%5 == 1 || i%5 == 3 {
				v = Failure
			}
			w1.report(v)
			if i > 2000 {
				t.Fatal("60% failures did not trip")
			}
			time.Sleep(50 * time.Millisecond)
		}
		golden(t, "weather.log", strings.Join(lines, "\n")+"\n")
	})
}

// A quiet worker: fewer than MinCalls calls in the window never trip on
// the ratio, however many of them failed.
func TestTallyMinCalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := Config{Failures: 100, MinCalls: 4, FailureRatio: 0.5, Window: time.Second}
		var tl Tally
		for _, v := range []Verdict{Failure, Success, Failure} {
			if trip, _ := tl.Observe(v, time.Now(), cfg); trip {
				t.Fatal("tripped below min_calls")
			}
		}
		// The window slides: the first failure leaves it.
		time.Sleep(time.Second)
		for _, v := range []Verdict{Success, Success, Failure} {
			if trip, _ := tl.Observe(v, time.Now(), cfg); trip {
				t.Fatal("tripped on calls that left the window")
			}
		}
		if trip, why := tl.Observe(Failure, time.Now(), cfg); !trip || why != "2 of the last 4 calls failed (within 1s)" {
			t.Fatalf("2 of 4: %v %q", trip, why)
		}
		if trip, _ := tl.Observe(Failure, time.Now(), Config{Failures: 100, FailureRatio: -1, MinCalls: 1}); trip {
			t.Fatal("a negative ratio tripped")
		}
	})
}

func TestConfigValidate(t *testing.T) {
	for _, c := range []Config{{Cooldown: -1}, {MaxCooldown: -1}, {ProbeTimeout: -1}, {Cooldown: time.Minute, MaxCooldown: time.Second},
		{FailureRatio: 1.5}, {MinCalls: -1}, {Window: -1}, {Window: time.Millisecond}} {
		if err := c.Validate("providers[0].breaker"); err == nil || !strings.HasPrefix(err.Error(), "providers[0].breaker.") {
			t.Errorf("%+v: %v", c, err)
		}
	}
	if err := (Config{FailureRatio: -1, MinCalls: 1, Window: time.Minute}).Validate("b"); err != nil {
		t.Errorf("valid ratio settings: %v", err)
	}
	if err := (Config{Cooldown: 10 * time.Minute}).Validate("b"); err != nil {
		t.Errorf("a long cooldown raises the default cap: %v", err)
	}
}

func TestClaimableFor(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	grace := time.Second
	open := State{Phase: Open, Since: t0, Until: t0.Add(5 * time.Second)}
	for _, tc := range []struct {
		name string
		s    State
		now  time.Time
		want bool
	}{
		{"closed", State{}, t0, false},
		{"open, cooling down", open, t0.Add(4 * time.Second), false},
		{"open, due but within grace", open, t0.Add(5500 * time.Millisecond), false},
		{"open, unclaimed for grace", open, t0.Add(6 * time.Second), true},
		{"half-open without a claim, within grace", State{Phase: HalfOpen, Since: t0}, t0.Add(500 * time.Millisecond), false},
		{"half-open without a claim for grace", State{Phase: HalfOpen, Since: t0}, t0.Add(time.Second), true},
		{"half-open, claim live", State{Phase: HalfOpen, Since: t0, Probe: "p", ProbeDeadline: t0.Add(3 * time.Second)}, t0.Add(2 * time.Second), false},
		{"half-open, claim expired grace ago", State{Phase: HalfOpen, Since: t0, Probe: "p", ProbeDeadline: t0.Add(3 * time.Second)}, t0.Add(4 * time.Second), true},
	} {
		if got := ClaimableFor(tc.s, tc.now, grace); got != tc.want {
			t.Errorf("%s: ClaimableFor = %v, want %v", tc.name, got, tc.want)
		}
	}
}
