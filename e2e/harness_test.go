package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/e2e/procs"
	"github.com/relaydev/relay/relay/app"
	"github.com/relaydev/relay/relay/backoff"
	"github.com/relaydev/relay/relay/config"
	"github.com/relaydev/relay/relay/mockupstream"
	"github.com/relaydev/relay/relay/natsconn"
	"github.com/relaydev/relay/relay/natsserver"
	"github.com/relaydev/relay/relay/provider"
	"github.com/relaydev/relay/relay/relaytest"
	"github.com/relaydev/relay/relay/streams"
	"github.com/relaydev/relay/relay/upstream"
	"github.com/relaydev/relay/relay/worker"
)

// start is the one way an end-to-end test runs a relay: a real
// nats-server, the fake upstream, workers and edges started as the relay
// binary starts them, and a coordinator when asked; in this process
// (through relay/app) or, with options.Processes, as processes of their
// own. The options say what a test varies; what a scenario needs beyond
// them (two regions, nginx in front) is built on start.

// system is a running relay.
type system struct {
	t    *testing.T
	o    options
	cfg  config.Config // in process: what every role runs with
	NATS *server.Server
	// Secured holds the role users' passwords, with options.Secured.
	Secured *securedNATS
	Mock    *mockupstream.Server
	Edges   []string // base URLs, "http://127.0.0.1:port"
	Edge    string   // Edges[0]
	// Worker and Coordinator are base URLs of the ops endpoints (/healthz,
	// /readyz, /metrics): the first worker's ("" when workers are wired
	// by hand) and the coordinator's ("" when wired by hand).
	Worker, Coordinator string
	// fronts are the providers' fronts, by provider name: every request
	// the fake upstream receives goes through one.
	fronts map[string]*front

	// With options.Record: what the worker's gate saw, and the worker
	// itself (tests call Reload).
	Gate  *gateLog
	Relay *worker.Worker

	fleetSystem   // with options.Fleet
	processSystem // with options.Processes

	serveOnce sync.Once
	serve     func()
}

type options struct {
	Edges, Workers int // zero: 1
	// Coordinator runs a coordinator too, before the other roles (with
	// options.Fleet, after them).
	Coordinator bool
	Mock        mockupstream.Config
	// Providers are the names of the providers, each serving mock-1 and
	// mock-2 from the one fake upstream through a front of its own
	// (system.fronts); zero: one, "mock".
	Providers []string
	// MockLater leaves the mock's port closed until the test calls
	// serveMock: calls to it are refused until then.
	MockLater bool
	// Record starts the one worker by hand with a gate that admits every
	// call and keeps every report, which is what a circuit breaker would
	// count (system.Gate).
	Record bool
	// Fleet starts each worker by hand around a fleet.SharedGate the test
	// can read (system.gates), records the breaker transitions and the
	// coordinator's events (system.events), and runs the coordinator by
	// hand so that a test can start, stop or kill it (harness_fleet_test.go
	// has the settings it runs with).
	Fleet bool
	// Tune adjusts the configuration every role is started with: the
	// providers with the mock's API keys, and edges that allow anonymous
	// clients. Presets: withFastRetry, withOpsModels, withTenants. Not
	// with Processes, which take Settings.
	Tune func(*config.Config)
	// Logs, when set, receives every role's log (debug level) instead of
	// the test log.
	Logs io.Writer
	// NATS is the server the roles use; nil: a fresh one.
	NATS *server.Server
	// NATSPassword, when set, makes the fresh NATS require user "relay"
	// with it.
	NATSPassword string
	// Secured runs the shipped NATS configuration (startSecuredNATS), each
	// role connecting as its own user, and fails the test if a role is
	// refused anything. Every role runs as the relay binary runs it: the
	// coordinator sets the JetStream topology up, the edge and the worker
	// find it set up, which needs no more than their read rights.
	Secured bool

	// Processes runs nats-server, the fake upstream and every role as
	// processes of their own (harness_process_test.go); the fields below
	// are for it alone.
	Processes bool
	// ClusterNodes: 0 runs one nats-server, 3 a three-node cluster.
	ClusterNodes int
	// Settings are given to every role: streams.*, models.
	Settings procs.Settings
	// EdgeSettings and WorkerSettings are settings of every edge and
	// every worker.
	EdgeSettings, WorkerSettings procs.Settings
	// Proxy puts a TCP proxy that records connections (upstreamProxy)
	// between the workers and the fake upstream.
	Proxy bool
	// ProviderType is the provider's type: the dialect the workers speak
	// to the fake upstream (zero: openai, chat completions).
	ProviderType string
	// ProvidersOf, if set, makes the providers every role is given from
	// the fake upstream's (zero: it alone, as mock serving mock-1 and
	// mock-2).
	ProvidersOf func(mock procs.Provider) []procs.Provider
}

// fastRetry keeps backoff short; the delays themselves are the backoff
// package's tests' concern.
var fastRetry = backoff.Config{Base: 20 * time.Millisecond, Cap: 100 * time.Millisecond}

// withFastRetry makes provider "mock" retry fast and give up on a silent
// call after 5s, so that fault scenarios take milliseconds; more, if set,
// runs after.
func withFastRetry(more func(*config.Config)) func(*config.Config) {
	return func(c *config.Config) {
		p := &c.Providers[0]
		p.Retry, p.FirstTokenTimeout, p.StallTimeout = fastRetry, 5*time.Second, 5*time.Second
		if more != nil {
			more(c)
		}
	}
}

// start runs a system for the test and stops it when the test ends.
func start(t *testing.T, o options) *system {
	t.Helper()
	o.Edges, o.Workers = max(o.Edges, 1), max(o.Workers, 1)
	if len(o.Providers) == 0 {
		o.Providers = []string{"mock"}
	}
	o.Coordinator = o.Coordinator || o.Secured
	inProcess := o.Tune != nil || o.Record || o.Fleet || o.Secured || o.NATS != nil || o.NATSPassword != "" || o.MockLater || o.Logs != nil || len(o.Providers) > 1
	processes := o.ClusterNodes > 0 || o.Settings != nil || o.EdgeSettings != nil || o.WorkerSettings != nil || o.Proxy || o.ProviderType != "" || o.ProvidersOf != nil
	switch {
	case o.Processes && inProcess, !o.Processes && processes:
		t.Fatalf("options: %+v mixes in-process options with options of Processes", o)
	case o.Record && (o.Workers > 1 || o.Fleet):
		t.Fatal("options.Record records one worker, not a fleet")
	}
	s := &system{t: t, o: o, NATS: o.NATS, fronts: map[string]*front{}}
	if o.Processes {
		s.startProcesses()
	} else {
		s.startInProcess()
	}
	return s
}

// startInProcess runs the system in this process, each role as the relay
// binary runs it (relay/app) but those options.Record and options.Fleet
// wire by hand.
func (s *system) startInProcess() {
	t, o := s.t, s.o
	t.Helper()
	logger := relaytest.Logger(t)
	if o.Logs != nil {
		logger = slog.New(slog.NewTextHandler(o.Logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	switch {
	case o.Secured:
		s.Secured = startSecuredNATS(t)
		s.NATS = s.Secured.srv
		logger = failOnViolations(t, logger)
	case o.NATSPassword != "":
		s.NATS = natsWithPassword(t, o.NATSPassword)
	case s.NATS == nil:
		s.NATS = relaytest.NATS(t)
	}
	g := newRunGroup(t)
	if o.Fleet {
		s.events = &fleetEvents{}
		// Cleanups run last first: the coordinator stops before the roles.
		t.Cleanup(s.stopCoordinator)
	}
	s.startMock(g, logger)
	cfg := s.config()
	s.cfg = cfg

	if o.Coordinator && !o.Fleet {
		s.Coordinator = "http://" + g.app(config.RoleCoordinator, s.roleConfig(cfg, "coordinator"), logger).Coordinator
	}
	for i := range o.Workers {
		switch {
		case o.Record:
			s.Gate = &gateLog{}
			nc, js := s.connect(g, "worker", logger)
			s.Relay = s.wireWorker(g, nc, js, cfg.Worker, s.Gate, logger.With("role", "worker"))
		case o.Fleet:
			s.startFleetWorker(g, fmt.Sprintf("w%d", i+1), logger)
		default:
			if a := g.app(config.RoleWorker, s.roleConfig(cfg, "worker"), logger); s.Worker == "" {
				s.Worker = "http://" + a.Worker
			}
		}
	}
	s.waitGatesSynced()
	for range o.Edges {
		s.Edges = append(s.Edges, "http://"+g.app(config.RoleEdge, s.roleConfig(cfg, "edge"), logger).Edge)
	}
	s.Edge = s.Edges[0]
	if o.Coordinator && o.Fleet {
		s.startCoordinator()
	}
}

// config is the configuration every in-process role runs with, checked
// for each role the system runs.
func (s *system) config() config.Config {
	t, o := s.t, s.o
	t.Helper()
	cfg := config.Config{NATS: natsconn.Config{URL: s.NATS.ClientURL()}}
	for _, name := range o.Providers {
		cfg.Providers = append(cfg.Providers, provider.Config{
			Name:    name,
			BaseURL: s.fronts[name].url,
			APIKeys: o.Mock.APIKeys,
			Models:  []string{"mock-1", "mock-2"},
		})
	}
	if o.NATSPassword != "" {
		cfg.NATS.User, cfg.NATS.Password = "relay", o.NATSPassword
	}
	cfg.Edge.Listen = "127.0.0.1:0"
	cfg.Edge.AllowAnonymous = true
	cfg.Worker.Listen = "127.0.0.1:0"
	cfg.Coordinator.Listen = "127.0.0.1:0"
	if o.Fleet {
		fleetSettings(&cfg)
	}
	if o.Tune != nil {
		o.Tune(&cfg)
	}
	roles := []config.Role{config.RoleWorker, config.RoleEdge}
	if o.Coordinator || o.Fleet {
		roles = append(roles, config.RoleCoordinator)
	}
	for _, role := range roles {
		if err := cfg.Validate(role); err != nil {
			t.Fatal(err)
		}
	}
	return cfg
}

// startMock runs the fake upstream on a loopback port behind one front per
// provider; with o.MockLater, the first provider's front serves from when
// the test calls serveMock.
func (s *system) startMock(g *runGroup, logger *slog.Logger) {
	t := g.t
	mock, err := mockupstream.New(s.o.Mock, logger.With("role", "mock-upstream"))
	if err != nil {
		t.Fatal(err)
	}
	s.Mock = mock
	for i, name := range s.o.Providers {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		f := &front{url: "http://" + addr + "/v1"}
		s.fronts[name] = f
		hs := &http.Server{Handler: f.handler(mock.Handler()), ReadHeaderTimeout: 5 * time.Second}
		context.AfterFunc(g.ctx, func() { hs.Close() })
		serve := func(l net.Listener) {
			g.run(func() error {
				if err := hs.Serve(l); !errors.Is(err, http.ErrServerClosed) {
					return err
				}
				return nil
			})
		}
		if i > 0 || !s.o.MockLater {
			serve(ln)
			continue
		}
		// Nothing listens on the port until serveMock takes it back.
		ln.Close()
		s.serve = func() {
			l, err := net.Listen("tcp", addr)
			if err != nil {
				t.Errorf("listen again on %s: %v", addr, err)
				return
			}
			serve(l)
		}
	}
}

// serveMock starts serving the mock on its port (once), with
// options.MockLater.
func (s *system) serveMock() { s.serveOnce.Do(s.serve) }

// roleConfig is cfg with the NATS credentials of role.
func (s *system) roleConfig(cfg config.Config, role string) config.Config {
	if s.Secured != nil {
		cfg.NATS = s.Secured.creds(role)
		if role == "coordinator" {
			cfg.SetupNATS = s.Secured.setupCreds()
		}
	}
	return cfg
}

// wireWorker starts a worker by hand with gate on nc and js (see
// connect), for a test that reads or replaces what relay/app would wire.
func (s *system) wireWorker(g *runGroup, nc *nats.Conn, js jetstream.JetStream, wcfg worker.Config, gate worker.Gate, logger *slog.Logger) *worker.Worker {
	t := g.t
	t.Helper()
	catalog, err := s.cfg.Catalog()
	if err != nil {
		t.Fatal(err)
	}
	w, err := worker.New(wcfg, worker.Deps{
		NC: nc, JS: js, Catalog: catalog, Upstream: upstream.NewClient(&http.Client{}),
		Logger: logger, Topology: s.cfg.Streams, Gate: gate,
	})
	if err != nil {
		t.Fatal(err)
	}
	g.run(func() error { return w.Run(g.ctx) })
	return w
}

// connect opens a connection for a role wired by hand, closed after the
// roles stopped, and sets the topology up.
func (s *system) connect(g *runGroup, role string, logger *slog.Logger) (*nats.Conn, jetstream.JetStream) {
	t := g.t
	t.Helper()
	nc, js, err := natsconn.Connect(s.roleConfig(s.cfg, role).NATS, "relay-"+role, logger.With("instance", role))
	if err != nil {
		t.Fatal(err)
	}
	g.closeAtEnd(nc)
	ctx, cancel := context.WithTimeout(g.ctx, 10*time.Second)
	defer cancel()
	if err := streams.Setup(ctx, js, s.cfg.Streams); err != nil {
		t.Fatalf("%s: %v", role, err)
	}
	return nc, js
}

// runGroup runs a test's servers and roles until the test ends, then
// cancels their context, waits for each to return and closes the
// connections they used.
type runGroup struct {
	t   *testing.T
	ctx context.Context

	mu    sync.Mutex
	done  []chan error
	conns []*nats.Conn
}

func newRunGroup(t *testing.T) *runGroup {
	ctx, cancel := context.WithCancel(context.Background())
	g := &runGroup{t: t, ctx: ctx}
	t.Cleanup(func() {
		cancel()
		g.mu.Lock()
		dones, conns := g.done, g.conns
		g.mu.Unlock()
		for _, done := range dones {
			select {
			case err := <-done:
				// A server whose graceful shutdown ran out of time (a
				// client still streaming) closed its connections: not a
				// failure here.
				if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("role stopped with: %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Errorf("a role did not stop within 30s")
			}
		}
		for _, nc := range conns {
			nc.Close()
		}
	})
	return g
}

// run runs f in a goroutine; it may be called while the test runs.
func (g *runGroup) run(f func() error) {
	done := make(chan error, 1)
	g.mu.Lock()
	g.done = append(g.done, done)
	g.mu.Unlock()
	go func() { done <- f() }()
}

func (g *runGroup) closeAtEnd(nc *nats.Conn) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.conns = append(g.conns, nc)
}

// app runs role as the relay binary runs it and waits until it serves.
func (g *runGroup) app(role config.Role, cfg config.Config, logger *slog.Logger) app.Addrs {
	g.t.Helper()
	ready := make(chan app.Addrs, 1)
	g.run(func() error {
		return app.Run(g.ctx, role, cfg, logger.With("instance", string(role)), func(a app.Addrs) { ready <- a })
	})
	select {
	case a := <-ready:
		return a
	case <-time.After(20 * time.Second):
		g.t.Fatalf("%s not ready", role)
		return app.Addrs{}
	}
}

// natsWithPassword starts a server that requires user "relay" with
// password, and shuts it down when the test ends.
func natsWithPassword(t *testing.T, password string) *server.Server {
	t.Helper()
	conf := filepath.Join(t.TempDir(), "nats.conf")
	text := fmt.Sprintf("jetstream {}\nauthorization { user: relay, password: %q }\n", password)
	if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	srv, err := natsserver.StartFile(conf, natsserver.Config{Listen: "127.0.0.1:-1", StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		srv.Shutdown()
		srv.WaitForShutdown()
	})
	return srv
}

// httpClient has no overall timeout: streams are long; tests bound them
// with their request contexts.
var httpClient = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
