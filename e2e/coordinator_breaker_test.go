package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relaydev/relay/relay/backoff"
	"github.com/relaydev/relay/relay/config"
	"github.com/relaydev/relay/relay/fleet"
	"github.com/relaydev/relay/relay/fleet/breaker"
	"github.com/relaydev/relay/relay/mockupstream"
	"github.com/relaydev/relay/relay/provider"
	"github.com/relaydev/relay/relay/relaytest"
	"github.com/relaydev/relay/relay/wire"
)

// breakerTune gives the first provider a short cooldown and few retries,
// so a few requests trip its breaker.
func breakerTune(cooldown time.Duration) func(cfg *config.Config) {
	return func(cfg *config.Config) { tuneBreaker(&cfg.Providers[0], cooldown) }
}

func tuneBreaker(p *provider.Config, cooldown time.Duration) {
	p.Retry = backoff.Config{Base: 10 * time.Millisecond, Cap: 20 * time.Millisecond, MaxRetries: 2}
	p.Breaker = breaker.Config{Cooldown: cooldown, MaxCooldown: 2 * cooldown, RecoveryJitter: 200 * time.Millisecond}
}

// trip sends requests while the provider is down until its breaker opens,
// and returns the open breaker (see waitFor). The requests go on in the
// background: their retries wait for the breaker.
func (c *system) trip(log *breakerLog, front *front) phaseAt {
	c.t.Helper()
	front.down.Store(true)
	start := time.Now()
	ctx, cancel := context.WithCancel(context.Background())
	c.t.Cleanup(cancel)
	for i := 0; !log.seen(breaker.Open, start); i++ {
		if time.Since(start) > 10*time.Second {
			c.t.Fatal("breaker did not open")
		}
		go unary(ctx, c.Edge, "mock-1", fmt.Sprintf("Trip %d.", i))
		time.Sleep(20 * time.Millisecond)
	}
	return log.waitFor(c.t, breaker.Open, start, time.Second)
}

// load sends requests from n clients until stop is closed, and counts the
// answers by status.
func (c *system) load(n int, every time.Duration, topic string, stop <-chan struct{}) (wait func() map[int]int) {
	var mu sync.Mutex
	counts := map[int]int{}
	var wg sync.WaitGroup
	var seq atomic.Int64
	for range n {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				status, _, _, err := unary(context.Background(), c.Edge, "mock-1", fmt.Sprintf("%s %d.", topic, seq.Add(1)))
				if err == nil {
					mu.Lock()
					counts[status]++
					mu.Unlock()
				}
				time.Sleep(every)
			}
		})
	}
	return func() map[int]int {
		wg.Wait()
		return counts
	}
}

// Three workers share one breaker. Once its cooldown is over, the workers
// keep sending requests, yet exactly one probe reaches the provider,
// claimed by one worker, and its success closes the breaker for all three.
func TestCoordinatorHalfOpenOneProbe(t *testing.T) {
	const cooldown = 1500 * time.Millisecond
	c := start(t, options{Fleet: true, Workers: 3, Tune: breakerTune(cooldown), Mock: mockupstream.Config{Tokens: 5}})
	front := c.fronts["mock"]
	log := c.watchBreaker("mock")
	opened := c.trip(log, front)
	learned := c.learnedOpen(mockOne)
	front.down.Store(false)

	stop := make(chan struct{})
	wait := c.load(6, 20*time.Millisecond, "Half-open", stop)
	closed := log.waitFor(t, breaker.Closed, opened.at, 5*cooldown)
	time.Sleep(300 * time.Millisecond)
	close(stop)
	statuses := wait()

	// The calls admitted before every worker knew of the open may still
	// arrive within grace of that; the calls let go by the close may
	// arrive before this test's watch brings it, so the window ends at the
	// breaker's own time of the close.
	const grace = 300 * time.Millisecond
	open, shut := opened.state, closed.state
	probes := front.chats(learned.Add(grace), shut.Since)
	claims := c.events.transitions(breaker.HalfOpen)
	if len(probes) != 1 || len(claims) != 1 {
		t.Fatalf("%d chat requests and %d probe claims between the open (%v) and the close (%v); want one of each",
			len(probes), len(claims), open.Since.Format("15:04:05.000"), shut.Since.Format("15:04:05.000"))
	}
	if claims[0].At.Before(open.Until) || open.Until.Sub(open.Since) != cooldown {
		t.Fatalf("opened at %v until %v, probe claimed at %v: before the %v cooldown ended",
			open.Since.Format("15:04:05.000"), open.Until.Format("15:04:05.000"), claims[0].At.Format("15:04:05.000"), cooldown)
	}
	by := map[string]int{}
	for _, ev := range c.events.transitions(breaker.Closed) {
		by[ev.By]++
	}
	// A request sent while the breaker was open waited for the probe's
	// verdict: every one was answered.
	if statuses[http.StatusOK] == 0 || len(statuses) != 1 {
		t.Fatalf("statuses %v: want every request answered, those sent while open after the close", statuses)
	}
	t.Logf("open for %v; one probe (claimed by %s), closed by %v; client statuses %v",
		shut.Since.Sub(open.Since).Round(time.Millisecond), claims[0].By, by, statuses)
}

// While every candidate's breaker is open, a new request that asks to fail
// fast gets a 503 at once from the edge, in OpenAI's error shape with
// Retry-After, streaming or not.
func TestCoordinatorAllOpenIsFast503(t *testing.T) {
	c := start(t, options{Fleet: true, Workers: 1, Tune: breakerTune(10 * time.Second)})
	log := c.watchBreaker("mock")
	c.trip(log, c.fronts["mock"])
	for _, stream := range []bool{false, true} {
		body := fmt.Sprintf(`{"model":"mock-1","stream":%v,"messages":[{"role":"user","content":"Open %v."}]}`, stream, stream)
		start := time.Now()
		req, _ := http.NewRequest(http.MethodPost, c.Edge+"/v1/chat/completions", stringsReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Relay-Fail-Fast", "true")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var e struct {
			Error struct {
				Message string  `json:"message"`
				Type    string  `json:"type"`
				Code    *string `json:"code"`
			} `json:"error"`
		}
		json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		ra, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
		took := time.Since(start)
		if resp.StatusCode != http.StatusServiceUnavailable || ra < 1 || ra > 10 || e.Error.Type != wire.TypeUpstream || e.Error.Message == "" || took > time.Second {
			t.Fatalf("stream %v: %d, Retry-After %q, error %+v after %v; want a fast 503 with Retry-After", stream, resp.StatusCode,
				resp.Header.Get("Retry-After"), e.Error, took)
		}
	}
	// The trip's own requests, admitted before the breaker opened, may
	// still reach the provider on a loaded machine: only these two must
	// not.
	for _, call := range c.fronts["mock"].allChats() {
		if strings.HasPrefix(call.conv, "Open ") {
			t.Fatalf("a request refused with the breaker open reached the provider: %+v", call)
		}
	}
}

// With the coordinator killed (its connection gone, its lease left to run
// out), requests still flow, and the workers trip the breaker and recover
// it on their own.
func TestCoordinatorKilledWorkersCarryOn(t *testing.T) {
	const cooldown = time.Second
	c := start(t, options{Fleet: true, Workers: 3, Coordinator: true, Tune: breakerTune(cooldown), Mock: mockupstream.Config{Tokens: 5}})
	front := c.fronts["mock"]
	leases := c.kv(wire.LeaseBucket)
	holder := func() string {
		l, err := fleet.LeaseHolder(context.Background(), leases, wire.CoordinatorLeaseKey)
		if err != nil {
			t.Fatal(err)
		}
		return l.Holder
	}
	if h := holder(); h != c.coord.Name() {
		t.Fatalf("lease held by %q, want the coordinator %q", h, c.coord.Name())
	}
	c.killCoordinator()

	ok := func(topic string, n int) {
		t.Helper()
		for i := range n {
			status, _, body, err := unary(context.Background(), c.Edge, "mock-1", fmt.Sprintf("%s %d.", topic, i))
			if err != nil || status != http.StatusOK {
				t.Fatalf("%s %d: %d %s %v", topic, i, status, body, err)
			}
		}
	}
	ok("No coordinator", 6)

	log := c.watchBreaker("mock")
	opened := c.trip(log, front)
	front.down.Store(false)
	stop := make(chan struct{})
	wait := c.load(3, 50*time.Millisecond, "Recovering", stop)
	log.waitFor(t, breaker.Closed, opened.at, 5*cooldown)
	close(stop)
	wait()
	ok("Recovered", 6)

	for _, ev := range c.events.transitions("") {
		if ev.By != "w1" && ev.By != "w2" && ev.By != "w3" {
			t.Fatalf("transition %v not made by a worker", ev)
		}
	}
	if n := len(c.events.transitions(breaker.Closed)); n != 1 {
		t.Fatalf("%d closes, want 1", n)
	}
	// Nobody released the dead coordinator's lease: it ran out.
	relaytest.Eventually(t, 3*c.cfg.Coordinator.LeaseTTL, 5*time.Millisecond, func() bool { return holder() == "" })
}

// GET /v1/relay/status serves the breakers, health, quotas and the active
// coordinator, as every edge reads them from the shared buckets.
func TestCoordinatorStatusEndpoint(t *testing.T) {
	c := start(t, options{Fleet: true, Workers: 3, Coordinator: true, Tune: breakerTune(time.Minute), Mock: mockupstream.Config{Tokens: 5}})
	c.fronts["mock"].down.Store(true)
	log := c.watchBreaker("mock")
	c.trip(log, c.fronts["mock"])
	var st fleet.Status
	// The edge reads every bucket for each request; on a loaded machine a
	// read may time out, which the answer reports (a 503 if nothing was
	// read, else in "errors"): ask again.
	relaytest.Eventually(t, 20*time.Second, 5*time.Millisecond, func() bool {
		resp, err := http.Get(c.Edge + "/v1/relay/status")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		st = fleet.Status{}
		if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK || len(st.Errors) > 0 {
			t.Logf("status %d, errors %v", resp.StatusCode, st.Errors)
			return false
		}
		return len(st.Health) == 1 && st.Health[0].State == wire.HealthRed && st.Health[0].Breaker == string(breaker.Open) && len(st.Quotas.Nodes) >= 4
	})
	if len(st.Breakers) != 1 || st.Breakers[0].Provider != "mock" || st.Breakers[0].Phase != breaker.Open {
		t.Fatalf("breakers %+v", st.Breakers)
	}
	if st.Coordinator.Holder != c.coord.Name() || st.Health[0].LastError == "" {
		t.Fatalf("coordinator %q, health %+v", st.Coordinator.Holder, st.Health)
	}
	calls := false
	for _, cs := range st.Quotas.Calls {
		calls = calls || cs.Target == "mock/mock-1" && cs.Failures > 0
	}
	if !calls {
		t.Fatalf("no failed calls of mock/mock-1 in %+v", st.Quotas.Calls)
	}
}

// An open breaker sends the requests to the provider's backup, which has
// a breaker of its own; once that one is open too, a new request that asks
// to fail fast gets the fast 503, and neither provider is called.
func TestCoordinatorOpenBreakerUsesBackup(t *testing.T) {
	c := start(t, options{Fleet: true, Workers: 2, Providers: []string{"mock", "backup"}, Mock: mockupstream.Config{Tokens: 5},
		Tune: func(cfg *config.Config) {
			for i := range cfg.Providers {
				tuneBreaker(&cfg.Providers[i], 10*time.Second)
			}
		}})
	primary, backup := c.fronts["mock"], c.fronts["backup"]
	c.trip(c.watchBreaker("mock"), primary)
	for i := range 5 {
		status, _, body, err := unary(context.Background(), c.Edge, "mock-1", fmt.Sprintf("Primary open %d.", i))
		if err != nil || status != http.StatusOK {
			t.Fatalf("with the primary's breaker open: %d %s %v", status, body, err)
		}
	}
	if p, b := convCalls(primary, "Primary open"), convCalls(backup, "Primary open"); p != 0 || b != 5 {
		t.Fatalf("with the primary's breaker open, %d calls reached it and %d its backup; want 0 and 5", p, b)
	}

	c.trip(c.watchBreaker("backup"), backup)
	start := time.Now()
	status, retryAfter, body, err := unaryWith(context.Background(), c.Edge, "mock-1", "Both open.", http.Header{"X-Relay-Fail-Fast": {"true"}})
	took := time.Since(start)
	if ra, _ := strconv.Atoi(retryAfter); err != nil || status != http.StatusServiceUnavailable || ra < 1 || took > time.Second {
		t.Fatalf("both open: %d with Retry-After %q after %v (%s %v); want a fast 503", status, retryAfter, took, body, err)
	}
	if p, b := convCalls(primary, "Both open"), convCalls(backup, "Both open"); p+b != 0 {
		t.Fatalf("with both breakers open, %d calls reached the primary and %d its backup", p, b)
	}
}

// convCalls counts the chat requests f got for conversations that begin
// with prefix.
func convCalls(f *front, prefix string) int {
	n := 0
	for _, c := range f.allChats() {
		if strings.HasPrefix(c.conv, prefix) {
			n++
		}
	}
	return n
}
