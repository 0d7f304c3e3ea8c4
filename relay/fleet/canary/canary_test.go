package canary

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

func TestRampThroughTheSteps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := Config{Provider: "new", Steps: []float64{1, 10, 50, 100}, Hold: time.Minute, MinSample: 10}
		var s State
		var events []string
		total := Counts{}
		step := func() {
			next, ev, err := Next(s, cfg, "m", time.Now(), total)
			if err != nil && !errors.Is(err, ErrNoChange) {
				t.Fatal(err)
			}
			if ev != nil {
				events = append(events, fmt.Sprintf("%v->%v %s", ev.From, ev.To, ev.Phase))
			}
			s = next
		}
		step()
		for range 5 * 60 {
			time.Sleep(time.Second)
			total.Calls += 10
			if total.Calls%1000 == 0 {
				total.Errors++ // 0.1%: under the threshold
			}
			step()
		}
		want := "0->1 ramping,1->10 ramping,10->50 ramping,50->100 ramping,100->100 done"
		if got := strings.Join(events, ","); got != want {
			t.Fatalf("events %s\nwant %s", got, want)
		}
		if s.Weight != 100 || s.Phase != Done {
			t.Fatalf("end state %+v", s)
		}
	})
}

func TestAbortNeedsTheMinimumSample(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := Config{Provider: "new", Steps: []float64{10, 100}, Hold: time.Hour, MinSample: 100, MaxErrorRate: 0.005}
		s, _, _ := Next(State{}, cfg, "m", time.Now(), Counts{Calls: 500, Errors: 50})
		// Failures before the ramp began do not count.
		s, ev, _ := Next(s, cfg, "m", time.Now(), Counts{Calls: 599, Errors: 51})
		if ev != nil || s.Phase != Ramping {
			t.Fatalf("aborted on %d calls: %+v", s.StepCounts().Calls, s)
		}
		s, ev, _ = Next(s, cfg, "m", time.Now(), Counts{Calls: 600, Errors: 51})
		if ev == nil || s.Phase != Aborted || s.Weight != 0 {
			t.Fatalf("not aborted at 1%% over 100 calls: %+v", s)
		}
		if !strings.Contains(ev.String(), "10% -> 0%") {
			t.Fatalf("event %q", ev)
		}
		// It stays aborted, whatever the counts, until the plan changes.
		time.Sleep(2 * time.Hour)
		if _, _, err := Next(s, cfg, "m", time.Now(), Counts{Calls: 10000}); !errors.Is(err, ErrNoChange) {
			t.Fatalf("aborted ramp moved: %v", err)
		}
		cfg.Steps = []float64{5, 100}
		s, ev, _ = Next(s, cfg, "m", time.Now(), Counts{Calls: 10000})
		if s.Phase != Ramping || s.Weight != 5 || ev == nil {
			t.Fatalf("new plan did not restart: %+v", s)
		}
	})
}

// Every call of the canary succeeds, but 3 of its 200 streams ended failed
// or incomplete for their clients (1.5%): the ramp aborts on the
// client-visible rate, and the event gives both figures with their counts.
func TestAbortOnClientVisibleFailures(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := Config{Provider: "new", Steps: []float64{50, 100}, Hold: time.Hour, MinSample: 200}
		s, _, _ := Next(State{}, cfg, "m", time.Now(), Counts{})
		// Fewer streams than the minimum sample: not judged yet, even with
		// enough calls.
		s, ev, _ := Next(s, cfg, "m", time.Now(), Counts{Calls: 400, Streams: 199, Failed: 3})
		if ev != nil || s.Phase != Ramping {
			t.Fatalf("aborted on %d streams: %+v", s.StepCounts().Streams, s)
		}
		s, ev, _ = Next(s, cfg, "m", time.Now(), Counts{Calls: 402, Streams: 200, Failed: 3})
		if ev == nil || s.Phase != Aborted || s.Weight != 0 {
			t.Fatalf("not aborted at 1.5%% of 200 streams: %+v", s)
		}
		want := "50% -> 0% (aborted; upstream calls 0/402 (0.00%) failed, client streams 3/200 (1.50%) failed or incomplete): " +
			"client-visible stream failure rate 1.50% over 0.50% at 50%"
		if got := ev.String(); !strings.HasSuffix(got, want) {
			t.Fatalf("event %q\nwant it to end in %q", got, want)
		}
	})
}

// A step that both rates keep under the threshold moves on, and its event
// carries both figures too.
func TestStepEventCarriesBothFigures(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := Config{Provider: "new", Steps: []float64{50, 100}, Hold: time.Minute, MinSample: 200}
		s, _, _ := Next(State{}, cfg, "m", time.Now(), Counts{Calls: 10, Errors: 5, Streams: 7, Failed: 2})
		time.Sleep(time.Minute)
		s, ev, _ := Next(s, cfg, "m", time.Now(), Counts{Calls: 1010, Errors: 9, Streams: 1007, Failed: 6})
		if ev == nil || s.Phase != Ramping || s.Weight != 100 {
			t.Fatalf("did not move on at 0.4%% of calls and streams: %+v", s)
		}
		want := "50% -> 100% (ramping; upstream calls 4/1000 (0.40%) failed, client streams 4/1000 (0.40%) failed or incomplete): step held 1m0s"
		if got := ev.String(); !strings.HasSuffix(got, want) {
			t.Fatalf("event %q\nwant it to end in %q", got, want)
		}
		if s.StepCounts() != (Counts{}) {
			t.Fatalf("the new step starts with counts %+v", s.StepCounts())
		}
	})
}

// Counts that went back (a coordinator with fresh totals) restart the
// step's counting, streams as well as calls.
func TestCountsThatWentBackRebase(t *testing.T) {
	cfg := Config{Provider: "new", Steps: []float64{50, 100}, Hold: time.Hour, MinSample: 10}
	now := time.Now()
	s, _, _ := Next(State{}, cfg, "m", now, Counts{Calls: 100, Streams: 100, Failed: 50})
	s, ev, _ := Next(s, cfg, "m", now, Counts{Calls: 100, Streams: 20})
	if ev != nil || s.Phase != Ramping || s.StepCounts() != (Counts{}) {
		t.Fatalf("after the counts went back: %+v, event %v", s, ev)
	}
}

func TestPickFollowsTheWeight(t *testing.T) {
	for _, w := range []float64{0, 1, 10, 50, 100} {
		n := 0
		for i := range 20000 {
			if Pick(fmt.Sprintf("s%d", i), w) {
				n++
			}
		}
		got := float64(n) / 200
		if got < w*0.8-0.3 || got > w*1.2+0.3 {
			t.Errorf("weight %v%%: picked %.2f%%", w, got)
		}
	}
	for i := range 1000 {
		id := fmt.Sprintf("s%d", i)
		if Pick(id, 10) && !Pick(id, 50) {
			t.Fatalf("%s picked at 10%% but not at 50%%", id)
		}
	}
}

func TestValidate(t *testing.T) {
	for _, c := range []Config{{}, {Provider: "p", Steps: []float64{10, 5}}, {Provider: "p", Steps: []float64{150}}, {Provider: "p", MaxErrorRate: 1}} {
		if err := c.Validate("models[0].canary"); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
}

// A step held for its time moves on only once the canary took its minimum
// sample of calls: a model with little traffic holds its step, and the
// state says why.
func TestStepWaitsForItsMinimumSample(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := Config{Provider: "new", Steps: []float64{50, 100}, Hold: time.Minute, MinSample: 200}
		s, _, _ := Next(State{}, cfg, "m", time.Now(), Counts{})
		time.Sleep(time.Hour)
		s, ev, err := Next(s, cfg, "m", time.Now(), Counts{Calls: 150})
		if err != nil || ev != nil || s.Weight != 50 || s.Phase != Ramping {
			t.Fatalf("moved on after 150 calls of 200: %+v, event %v, %v", s, ev, err)
		}
		if want := "waiting for 200 canary calls (150 so far)"; !strings.Contains(s.Reason, want) {
			t.Fatalf("reason %q, want it to say %q", s.Reason, want)
		}
		s, ev, _ = Next(s, cfg, "m", time.Now(), Counts{Calls: 200})
		if ev == nil || s.Weight != 100 {
			t.Fatalf("held at 200 calls: %+v", s)
		}
		// The last step too: it is done once judged, not before.
		time.Sleep(time.Hour)
		s, ev, _ = Next(s, cfg, "m", time.Now(), Counts{Calls: 210})
		if ev != nil || s.Phase != Ramping {
			t.Fatalf("done after 10 calls at 100%%: %+v", s)
		}
	})
}
