package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/coordinator"
	"github.com/relaydev/relay/relay/config"
	"github.com/relaydev/relay/relay/fleet"
	"github.com/relaydev/relay/relay/fleet/breaker"
	"github.com/relaydev/relay/relay/fleet/canary"
	"github.com/relaydev/relay/relay/mockupstream"
	"github.com/relaydev/relay/relay/natsconn"
	"github.com/relaydev/relay/relay/provider"
	"github.com/relaydev/relay/relay/relaytest"
	"github.com/relaydev/relay/relay/upstream"
	"github.com/relaydev/relay/relay/wire"
	"github.com/relaydev/relay/relay/worker"
)

// The coordinator tests (issue 6) run a real nats-server, one fake
// upstream behind one front per provider (the front logs every request
// and injects outages), several workers started with worker.New and the
// cluster gate as relay/app wires them, an edge started as the binary
// starts it, and, when a test asks, a coordinator it can stop.

// cluCall is one request a provider's front received.
type cluCall struct {
	at    time.Time
	path  string
	model string
	conv  string // the first user message: one per client request
}

// cluFront is a provider's front: it logs requests, and fails them while
// down (503 for new ones, the connection cut for streams under way) or
// when fail says so.
type cluFront struct {
	name string
	url  string // provider base URL
	down atomic.Bool
	// fail, if set, answers a chat request with the status it returns
	// (0: pass it on), given the request's index from 0.
	fail atomic.Pointer[func(n int, c cluCall) (status int, retryAfter string)]

	mu    sync.Mutex
	calls []cluCall
}

func (f *cluFront) handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := cluCall{at: time.Now(), path: r.URL.Path}
		if r.URL.Path == "/v1/chat/completions" {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			var req struct {
				Model    string `json:"model"`
				Messages []mockupstream.Message
			}
			_ = json.Unmarshal(body, &req)
			c.model = req.Model
			for _, m := range req.Messages {
				if m.Role == "user" {
					c.conv = m.Content
					break
				}
			}
		}
		f.mu.Lock()
		n := len(f.calls)
		f.calls = append(f.calls, c)
		f.mu.Unlock()
		if f.down.Load() {
			http.Error(w, `{"error":{"message":"down","type":"server_error"}}`, http.StatusServiceUnavailable)
			return
		}
		if fail := f.fail.Load(); fail != nil && c.path == "/v1/chat/completions" {
			if status, ra := (*fail)(n, c); status != 0 {
				if ra != "" {
					w.Header().Set("Retry-After", ra)
				}
				http.Error(w, `{"error":{"message":"injected","type":"server_error"}}`, status)
				return
			}
		}
		next.ServeHTTP(&cutWriter{ResponseWriter: w, down: &f.down}, r)
	})
}

// cutWriter drops the connection of a stream under way once its front
// goes down.
type cutWriter struct {
	http.ResponseWriter
	down *atomic.Bool
}

func (c *cutWriter) Write(b []byte) (int, error) {
	if c.down.Load() {
		panic(http.ErrAbortHandler)
	}
	return c.ResponseWriter.Write(b)
}

func (c *cutWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }

// chats returns the chat requests received in [from, to).
func (f *cluFront) chats(from, to time.Time) []cluCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []cluCall
	for _, c := range f.calls {
		if c.path == "/v1/chat/completions" && !c.at.Before(from) && c.at.Before(to) {
			out = append(out, c)
		}
	}
	return out
}

func (f *cluFront) allChats() []cluCall { return f.chats(time.Time{}, time.Now().Add(time.Hour)) }

// cluOptions configure one coordinator test's cluster.
type cluOptions struct {
	Workers     int
	Edges       int      // default 1
	Providers   []string // default: one, "mock"
	Mock        mockupstream.Config
	Coordinator bool
	// Tune edits the configuration: the providers (serving mock-1 and
	// mock-2 through their fronts, with fast retries) and the
	// coordinator's section.
	Tune func(cfg *config.Config)
	// Interval is the workers' and coordinator's quota and canary
	// interval (zero: 100ms).
	Interval time.Duration
}

// clu is a running cluster.
type clu struct {
	t       *testing.T
	srv     *server.Server
	cfg     config.Config
	edge    string
	edges   []string
	fronts  map[string]*cluFront
	gates   []*fleet.SharedGate
	workers []*worker.Worker
	events  *cluEvents

	coordMu     sync.Mutex
	coord       *coordinator.Coordinator
	coordCancel context.CancelFunc
	coordDone   chan error
	coordConn   *nats.Conn
}

// cluEvents collects the breaker transitions every worker made and the
// coordinator's events.
type cluEvents struct {
	mu      sync.Mutex
	breaker []breaker.Event
	coord   []coordinator.Event
}

func (e *cluEvents) OnEvent(ev breaker.Event) {
	e.mu.Lock()
	e.breaker = append(e.breaker, ev)
	e.mu.Unlock()
}

// transitions returns the transitions to phase ("": all of them); for
// half-open, only the probe claims (not the releases of a claim).
func (e *cluEvents) transitions(to breaker.Phase) []breaker.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []breaker.Event
	for _, ev := range e.breaker {
		if to == "" || ev.To == to && (to != breaker.HalfOpen || strings.Contains(ev.Reason, "claimed")) {
			out = append(out, ev)
		}
	}
	return out
}

func (e *cluEvents) coordEvents(kind string) []coordinator.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []coordinator.Event
	for _, ev := range e.coord {
		if ev.Kind == kind {
			out = append(out, ev)
		}
	}
	return out
}

func startClu(t *testing.T, o cluOptions) *clu {
	t.Helper()
	if o.Workers == 0 {
		o.Workers = 3
	}
	if len(o.Providers) == 0 {
		o.Providers = []string{"mock"}
	}
	if o.Interval == 0 {
		o.Interval = 100 * time.Millisecond
	}
	logger := relaytest.Logger(t)
	srv := relaytest.NATS(t)
	g := newRunGroup(t)
	c := &clu{t: t, srv: srv, fronts: map[string]*cluFront{}, events: &cluEvents{}}
	// Cleanups run last first: the coordinator stops before the roles.
	t.Cleanup(c.stopCoordinator)
	mock, err := mockupstream.New(o.Mock, logger.With("role", "mock-upstream"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Config{NATS: natsconn.Config{URL: srv.ClientURL()}}
	for _, name := range o.Providers {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		f := &cluFront{name: name, url: "http://" + ln.Addr().String() + "/v1"}
		c.fronts[name] = f
		hs := &http.Server{Handler: f.handler(mock.Handler()), ReadHeaderTimeout: 5 * time.Second}
		g.run(func() error {
			if err := hs.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		})
		go func() {
			<-g.ctx.Done()
			hs.Close()
		}()
		cfg.Providers = append(cfg.Providers, provider.Config{
			Name: name, BaseURL: f.url, Models: []string{"mock-1", "mock-2"},
			Retry:             fastRetry,
			FirstTokenTimeout: 5 * time.Second, StallTimeout: 5 * time.Second,
		})
	}
	cfg.Edge.Listen = "127.0.0.1:0"
	cfg.Edge.AllowAnonymous = true
	cfg.Coordinator.Listen = "127.0.0.1:0"
	cfg.Coordinator.HealthInterval = 500 * time.Millisecond
	cfg.Coordinator.QuotaInterval = o.Interval
	cfg.Coordinator.CanaryInterval = o.Interval
	cfg.Coordinator.LeaseTTL = 2 * time.Second
	cfg.Worker.MaxInflight = 100
	// The machine may be loaded (race detector, other tests): a worker
	// must not be taken for dead and its requests handed over, which
	// would look like retries.
	cfg.Worker.LivenessTimeout = 5 * time.Second
	cfg.Streams.AckWait = 30 * time.Second
	if o.Tune != nil {
		o.Tune(&cfg)
	}
	for _, role := range []config.Role{config.RoleWorker, config.RoleEdge, config.RoleCoordinator} {
		if err := cfg.Validate(role); err != nil {
			t.Fatal(err)
		}
	}
	c.cfg = cfg
	catalog, err := cfg.Catalog()
	if err != nil {
		t.Fatal(err)
	}
	for i := range o.Workers {
		nc, js := relaytest.Connect(t, srv, cfg.Streams)
		wcfg := cfg.Worker
		wcfg.ID = fmt.Sprintf("w%d", i+1)
		wlog := logger.With("role", "worker", "worker", wcfg.ID)
		gate, err := fleet.NewSharedGate(g.ctx, fleet.SharedGateConfig{ID: wcfg.ID, QuotaInterval: o.Interval},
			fleet.SharedGateDeps{JS: js, Catalog: catalog, Logger: wlog, Events: c.events})
		if err != nil {
			t.Fatal(err)
		}
		w, err := worker.New(wcfg, worker.Deps{
			NC: nc, JS: js, Catalog: catalog, Upstream: upstream.NewClient(&http.Client{}),
			Logger: wlog, Topology: cfg.Streams, Gate: gate,
		})
		if err != nil {
			t.Fatal(err)
		}
		g.run(func() error { return gate.Run(g.ctx) })
		g.run(func() error { return w.Run(g.ctx) })
		c.gates = append(c.gates, gate)
		c.workers = append(c.workers, w)
	}
	for _, g := range c.gates {
		select {
		case <-g.Synced():
		case <-time.After(10 * time.Second):
			t.Fatal("gate did not read the shared state")
		}
	}
	for range max(o.Edges, 1) {
		c.edges = append(c.edges, "http://"+g.app(config.RoleEdge, cfg, logger.With("role", "edge")).Edge)
	}
	c.edge = c.edges[0]
	if o.Coordinator {
		c.startCoordinator()
	}
	return c
}

// startCoordinator starts a coordinator on its own connection and waits
// until it holds the lease.
func (c *clu) startCoordinator() {
	c.t.Helper()
	nc, js := relaytest.Connect(c.t, c.srv, c.cfg.Streams)
	catalog, err := c.cfg.Catalog()
	if err != nil {
		c.t.Fatal(err)
	}
	co, err := coordinator.New(c.cfg.Coordinator, coordinator.Deps{
		JS: js, Topology: c.cfg.Streams, Catalog: catalog, Logger: relaytest.Logger(c.t).With("role", "coordinator"),
		Events: func(ev coordinator.Event) {
			c.events.mu.Lock()
			c.events.coord = append(c.events.coord, ev)
			c.events.mu.Unlock()
		},
	})
	if err != nil {
		c.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- co.Run(ctx) }()
	c.coordMu.Lock()
	c.coord, c.coordCancel, c.coordDone, c.coordConn = co, cancel, done, nc
	c.coordMu.Unlock()
	relaytest.Eventually(c.t, 10*time.Second, 20*time.Millisecond, co.Active)
}

// killCoordinator stops the coordinator as a kill would: its connection
// goes first, so it neither releases its lease nor writes anything more.
func (c *clu) killCoordinator() {
	c.coordMu.Lock()
	nc := c.coordConn
	c.coordMu.Unlock()
	nc.Close()
	c.stopCoordinator()
}

// stopCoordinator stops the coordinator, if one runs.
func (c *clu) stopCoordinator() {
	c.coordMu.Lock()
	cancel, done := c.coordCancel, c.coordDone
	c.coordCancel, c.coordDone = nil, nil
	c.coordMu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	if err := <-done; err != nil {
		c.t.Errorf("coordinator stopped with: %v", err)
	}
}

// kv opens a shared bucket.
func (c *clu) kv(bucket string) jetstream.KeyValue {
	c.t.Helper()
	_, js := relaytest.Connect(c.t, c.srv, c.cfg.Streams)
	kv, err := js.KeyValue(context.Background(), bucket)
	if err != nil {
		c.t.Fatal(err)
	}
	return kv
}

// phaseAt is one breaker phase, as a watcher saw it.
type phaseAt struct {
	at    time.Time
	state breaker.State
}

// breakerLog follows a breaker's phases through a watch of its own.
type breakerLog struct {
	mu     sync.Mutex
	phases []phaseAt
}

func (c *clu) watchBreaker(scope string) *breakerLog {
	c.t.Helper()
	l := &breakerLog{}
	tab := fleet.NewTable[breaker.State](c.kv(wire.BreakerBucket), nil, scope)
	tab.OnChange = func(_ string, row fleet.Row[breaker.State], ok bool) {
		l.mu.Lock()
		l.phases = append(l.phases, phaseAt{at: time.Now(), state: row.Value})
		l.mu.Unlock()
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.t.Cleanup(cancel)
	go tab.Run(ctx)
	<-tab.Synced()
	return l
}

// waitFor waits until the breaker is in phase, and returns the first such
// state seen after since: at is when this test's watch brought it, which
// lags the transition by the write and the watch (more on a loaded
// machine); the state's own Since and Until are the breaker's times, the
// ones to compare with its cooldown.
func (l *breakerLog) waitFor(t *testing.T, phase breaker.Phase, since time.Time, within time.Duration) phaseAt {
	t.Helper()
	var found phaseAt
	relaytest.Eventually(t, within, 5*time.Millisecond, func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		for _, p := range l.phases {
			if p.at.After(since) && p.state.Current() == phase {
				found = p
				return true
			}
		}
		return false
	})
	return found
}

// seen reports whether the breaker was in phase after since.
func (l *breakerLog) seen(phase breaker.Phase, since time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, p := range l.phases {
		if p.at.After(since) && p.state.Current() == phase {
			return true
		}
	}
	return false
}

// learnedOpen waits until every worker's copy of the breaker at scope is
// open (or already probing), and returns when: from a little after that
// moment, a call that reaches the provider is a probe (the calls admitted
// before may still be on their way).
func (c *clu) learnedOpen(scope string) time.Time {
	c.t.Helper()
	relaytest.Eventually(c.t, 5*time.Second, time.Millisecond, func() bool {
		for _, g := range c.gates {
			if g.Breaker(scope).Current() == breaker.Closed {
				return false
			}
		}
		return true
	})
	return time.Now()
}

// unary posts a "stream": false request and returns the status, the
// Retry-After header and the body.
func unary(ctx context.Context, edge, model, content string) (int, string, []byte, error) {
	body, _ := json.Marshal(map[string]any{
		"model": model, "stream": false,
		"messages": []mockupstream.Message{{Role: "user", Content: content}},
	})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, edge+"/v1/chat/completions", bytes.NewReader(body))
	if err != nil {
		return 0, "", nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := httpClient.Do(req)
	if err != nil {
		return 0, "", nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Retry-After"), b, err
}

// usageOf is the usage of a chat.completion body.
func usageOf(body []byte) wire.Usage {
	var v struct {
		Usage wire.Usage `json:"usage"`
	}
	_ = json.Unmarshal(body, &v)
	return v.Usage
}

// canaryAt is one state of a canary ramp, as a watcher saw it.
type canaryAt struct {
	at    time.Time
	state canary.State
}

// watchCanary follows a model's canary ramp.
func (c *clu) watchCanary(model string) func() []canaryAt {
	c.t.Helper()
	var mu sync.Mutex
	var states []canaryAt
	tab := fleet.NewTable[canary.State](c.kv(wire.CanaryBucket), nil, wire.KeyToken(model))
	tab.OnChange = func(_ string, row fleet.Row[canary.State], ok bool) {
		if ok {
			mu.Lock()
			states = append(states, canaryAt{at: time.Now(), state: row.Value})
			mu.Unlock()
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.t.Cleanup(cancel)
	go tab.Run(ctx)
	<-tab.Synced()
	return func() []canaryAt {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(states)
	}
}

// spreadOf describes arrival offsets from an anchor: the 10th and 90th
// percentiles, and the largest share of them in one tenth of window (the
// ones after the window, late by scheduling, count in no tenth).
func spreadOf(offsets []time.Duration, window time.Duration) (p10, p90 time.Duration, maxBin float64) {
	if len(offsets) == 0 {
		return 0, 0, 0
	}
	sorted := slices.Clone(offsets)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
	p10, p90 = sorted[len(sorted)/10], sorted[len(sorted)*9/10]
	var bins [10]int
	for _, d := range sorted {
		if i := int(10 * d / window); i < 10 {
			bins[max(i, 0)]++
		}
	}
	return p10, p90, float64(slices.Max(bins[:])) / float64(len(sorted))
}

func stringsReader(s string) io.Reader { return bytes.NewReader([]byte(s)) }
