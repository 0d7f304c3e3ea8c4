package e2e

import (
	"math"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/relaydev/relay/relay/config"
	"github.com/relaydev/relay/relay/fleet/canary"
	"github.com/relaydev/relay/relay/mockupstream"
	"github.com/relaydev/relay/relay/provider"
	"github.com/relaydev/relay/relay/relaytest"
)

// canaryTune makes "canary" the canary of mock-1, next to "stable".
func canaryTune(c canary.Config) func(cfg *config.Config) {
	return func(cfg *config.Config) {
		cfg.Models = []provider.Model{{Name: "mock-1", Canary: &c}}
	}
}

// weightsOf lists the distinct weights a ramp went through, in order, and
// when each began.
func weightsOf(states []canaryAt) (weights []float64, since []time.Time, last canary.State) {
	for _, s := range states {
		if len(weights) == 0 || weights[len(weights)-1] != s.state.Weight {
			weights = append(weights, s.state.Weight)
			since = append(since, s.at)
		}
		last = s.state
	}
	return weights, since, last
}

// The coordinator ramps the canary through 10%, 50% and 100%, each held for
// 2s, and every worker routes by the shared weight: the canary's share of
// the calls follows the steps. The coordinator starts once the load flows,
// so that the first step sees calls however slowly the machine starts the
// clients.
func TestCoordinatorCanaryRamps(t *testing.T) {
	c := start(t, options{
		Fleet:   true,
		Workers: 3, Providers: []string{"stable", "canary"},
		Mock: mockupstream.Config{Tokens: 3, TokenInterval: -1},
		Tune: canaryTune(canary.Config{Provider: "canary", Steps: []float64{10, 50, 100}, Hold: 2 * time.Second, MinSample: 5}),
	})
	ramp := c.watchCanary("mock-1")
	stop := make(chan struct{})
	wait := c.load(8, 0, "Canary ramp", stop)
	relaytest.Eventually(t, 20*time.Second, 5*time.Millisecond, func() bool { return len(c.fronts["stable"].allChats()) >= 8 })
	c.startCoordinator()
	relaytest.Eventually(t, 30*time.Second, 5*time.Millisecond, func() bool {
		_, _, last := weightsOf(ramp())
		return last.Phase == canary.Done
	})
	end := time.Now()
	close(stop)
	if statuses := wait(); len(statuses) != 1 || statuses[http.StatusOK] == 0 {
		t.Fatalf("client statuses %v: every request should have been answered", statuses)
	}
	weights, since, _ := weightsOf(ramp())
	if !slices.Equal(weights, []float64{10, 50, 100}) {
		t.Fatalf("ramp went through %v, want 10, 50, 100", weights)
	}
	share := func(from, to time.Time) (float64, int) {
		n := len(c.fronts["canary"].chats(from, to))
		total := n + len(c.fronts["stable"].chats(from, to))
		if total == 0 {
			return 0, 0
		}
		return float64(n) / float64(total), total
	}
	const settle = 500 * time.Millisecond // the workers' copies follow the watch
	prev := 0.0
	for i, w := range weights {
		to := end
		if i+1 < len(since) {
			to = since[i+1]
		}
		got, n := share(since[i].Add(settle), to)
		// Each call goes to the canary with probability w (canary.Pick
		// hashes the stream id), so the share may stray from w by the
		// binomial spread: allow 4 standard deviations, which a correct
		// ramp exceeds once in 15,000 steps.
		p := w / 100
		spread := 4 * math.Sqrt(p*(1-p)/float64(max(n, 1)))
		t.Logf("step %v%%: canary took %.0f%% of %d calls (allowed %.0f%% to %.0f%%)", w, 100*got, n, 100*(p-spread), 100*(p+spread))
		if n < 10 || math.Abs(got-p) > spread {
			t.Fatalf("at %v%% the canary took %.0f%% of %d calls", w, 100*got, n)
		}
		if got <= prev {
			t.Fatalf("at %v%% the canary took %.0f%% of the calls, no more than at the step before (%.0f%%)", w, 100*got, 100*prev)
		}
		prev = got
	}
}

// The canary fails every call. Clients do not notice (the route falls back
// to the stable provider, and the abort event counts no client-visible
// failure), and once the canary's error rate over at least 5 calls is
// above 0.5%, the coordinator aborts the ramp, logs it, and the weight
// back at 0 keeps every worker's calls off the canary.
func TestCoordinatorCanaryAbortsOnErrors(t *testing.T) {
	c := start(t, options{
		Fleet:   true,
		Workers: 3, Providers: []string{"stable", "canary"}, Coordinator: true,
		Mock: mockupstream.Config{Tokens: 3, TokenInterval: -1},
		Tune: canaryTune(canary.Config{Provider: "canary", Steps: []float64{50, 100}, Hold: time.Minute, MinSample: 5}),
	})
	fail := func(int, upstreamCall) (int, string) { return http.StatusInternalServerError, "" }
	c.fronts["canary"].fail.Store(&fail)
	ramp := c.watchCanary("mock-1")

	stop := make(chan struct{})
	wait := c.load(6, 10*time.Millisecond, "Canary abort", stop)
	var aborted time.Time
	relaytest.Eventually(t, 10*time.Second, 5*time.Millisecond, func() bool {
		for _, s := range ramp() {
			if s.state.Phase == canary.Aborted {
				aborted = s.at
				return true
			}
		}
		return false
	})
	// Once every worker's copy shows the abort (and the calls routed
	// before have left), no call goes to the canary.
	relaytest.Eventually(t, 5*time.Second, time.Millisecond, func() bool {
		for _, g := range c.gates {
			if s, _ := g.Canary("mock-1"); s.Phase != canary.Aborted {
				return false
			}
		}
		return true
	})
	time.Sleep(300 * time.Millisecond)
	before := len(c.fronts["canary"].allChats())
	time.Sleep(time.Second)
	after := len(c.fronts["canary"].allChats())
	close(stop)
	statuses := wait()

	_, _, last := weightsOf(ramp())
	events := c.events.coordEvents("canary")
	abort := ""
	for _, ev := range events {
		if strings.Contains(ev.Text, "aborted") {
			abort = ev.Text
		}
	}
	t.Logf("aborted %v: %s; canary calls %d, then %d over the next second; client statuses %v", aborted.Format("15:04:05.000"), last.Reason, before, after-before, statuses)
	switch {
	case last.Weight != 0 || last.Phase != canary.Aborted:
		t.Fatalf("ramp ended %+v, want aborted at weight 0", last)
	case abort == "":
		t.Fatalf("no abort event logged: %v", events)
	case !strings.Contains(abort, "client streams 0/"):
		t.Fatalf("abort event %q: the streams the stable provider rescued ended well for their clients", abort)
	case after != before:
		t.Fatalf("%d calls reached the canary after the abort", after-before)
	case statuses[http.StatusOK] == 0 || len(statuses) != 1:
		t.Fatalf("client statuses %v: the canary's failures should fall back to the stable provider", statuses)
	}
}

// The canary rejects a third of its calls with a 400, which no retry or
// fallback can rescue (the request looks at fault), so those clients get
// an error, while not one canary call counts as failed. The coordinator
// aborts the ramp on the client-visible stream failure rate, and the
// event it logs gives both figures with their counts.
func TestCoordinatorCanaryAbortsOnClientVisibleFailures(t *testing.T) {
	c := start(t, options{
		Fleet:   true,
		Workers: 3, Providers: []string{"stable", "canary"}, Coordinator: true,
		Mock: mockupstream.Config{Tokens: 3, TokenInterval: -1},
		Tune: canaryTune(canary.Config{Provider: "canary", Steps: []float64{50, 100}, Hold: time.Minute, MinSample: 5}),
	})
	reject := func(n int, call upstreamCall) (int, string) {
		if call.probe || n%3 != 0 {
			return 0, ""
		}
		return http.StatusBadRequest, ""
	}
	c.fronts["canary"].fail.Store(&reject)
	ramp := c.watchCanary("mock-1")

	stop := make(chan struct{})
	wait := c.load(6, 10*time.Millisecond, "Canary clients", stop)
	relaytest.Eventually(t, 10*time.Second, 5*time.Millisecond, func() bool {
		_, _, last := weightsOf(ramp())
		return last.Phase == canary.Aborted
	})
	close(stop)
	statuses := wait()

	_, _, last := weightsOf(ramp())
	var abort string
	for _, ev := range c.events.coordEvents("canary") {
		if strings.Contains(ev.Text, "(aborted;") {
			abort = ev.Text
		}
	}
	t.Logf("abort event: %s; client statuses %v", abort, statuses)
	switch {
	case last.Weight != 0:
		t.Fatalf("ramp ended %+v, want aborted at weight 0", last)
	case abort == "":
		t.Fatalf("no abort event logged: %v", c.events.coordEvents("canary"))
	case !strings.Contains(abort, "upstream calls 0/"):
		t.Fatalf("abort event %q: no canary call failed, and the event should say so", abort)
	case !strings.Contains(abort, "client-visible stream failure rate") || strings.Contains(abort, "upstream call failure rate"):
		t.Fatalf("abort event %q: the ramp should abort on the client-visible rate alone", abort)
	case !regexp.MustCompile(`client streams [1-9]\d*/\d+ \(\d+\.\d\d%\) failed or incomplete`).MatchString(abort):
		t.Fatalf("abort event %q: want the client streams that failed, with their count and rate", abort)
	case statuses[http.StatusBadRequest] == 0:
		t.Fatalf("client statuses %v: the canary's rejections should have reached clients", statuses)
	}
}
