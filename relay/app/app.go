// Package app wires the roles into running processes: it is what each
// subcommand of the relay binary runs, and what tests start in-process.
// Roles stay libraries that are handed their connections and listeners;
// only this package dials NATS and opens sockets.
package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/sync/errgroup"

	"github.com/relaydev/relay/coordinator"
	"github.com/relaydev/relay/edge"
	"github.com/relaydev/relay/relay/backoff"
	"github.com/relaydev/relay/relay/config"
	"github.com/relaydev/relay/relay/mockupstream"
	"github.com/relaydev/relay/relay/natsconn"
	"github.com/relaydev/relay/relay/natsserver"
	"github.com/relaydev/relay/relay/provider"
	"github.com/relaydev/relay/relay/region"
	"github.com/relaydev/relay/relay/streams"
	"github.com/relaydev/relay/relay/worker"
)

// Ready is told the addresses a process listens on once it serves.
type Ready func(Addrs)

// Addrs are the addresses a running process serves on; empty when the
// role is not part of it.
type Addrs struct {
	NATS         string // client URL of the embedded server
	Edge         string // host:port
	EdgeOps      string // host:port of the edge's /healthz, /readyz, /metrics (edge.ops_listen)
	MockUpstream string // host:port
	Coordinator  string // host:port of /healthz, /readyz, /metrics
	Worker       string // host:port of /healthz, /readyz, /metrics
	Pprof        string // host:port of /debug/pprof/ (pprof_listen)
	// Model is a model the edge serves (dev: the first of its first
	// provider), for the ready line's example request.
	Model string
}

// Run runs role with cfg until ctx ends, then shuts it down gracefully: a
// worker drains (see worker.Worker.Drain), within worker.drain_timeout.
// With pprof_listen set, the profiling listener (pprof.go) serves from
// before the role connects until the role stopped.
func Run(ctx context.Context, role config.Role, cfg config.Config, logger *slog.Logger, ready Ready) error {
	if ready == nil {
		ready = func(Addrs) {}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	g, ctx := errgroup.WithContext(ctx)
	pprofAddr, err := startPprof(ctx, g, cfg.PprofListen, logger)
	if err != nil {
		return err
	}
	g.Go(func() error {
		defer cancel() // the role stopped: so does the profiling listener
		return runRole(ctx, role, cfg, logger, func(a Addrs) {
			a.Pprof = pprofAddr
			ready(a)
		})
	})
	return g.Wait()
}

// runRole runs role itself, without the profiling listener Run adds. Its
// listener (the edge's API, the others' ops listener) serves before NATS is
// reached, so /healthz answers while NATS is out of reach and /readyz says
// what the role waits for (relay/README.md "Observability"); the role starts once
// the streams are set up.
func runRole(ctx context.Context, role config.Role, cfg config.Config, logger *slog.Logger, ready Ready) error {
	switch role {
	case config.RoleMockUpstream:
		return runMock(ctx, cfg, logger, ready)
	case config.RoleDev:
		return runDev(ctx, cfg, logger, ready)
	case config.RoleSetup:
		return runSetup(ctx, cfg, logger, ready)
	case config.RoleEdge, config.RoleWorker, config.RoleCoordinator:
	default:
		return fmt.Errorf("app: unknown role %q", role)
	}
	catalog, err := cfg.Catalog()
	if err != nil {
		return err
	}
	tracer, stopTracing, err := startTracing(cfg, role, logger)
	if err != nil {
		return err
	}
	defer stopTracing()
	if cfg.Worker.ID == "" {
		// A node with its own NATS identity reports its quota demand under
		// its name, the one key of its role its user may write.
		cfg.Worker.ID = cfg.NATS.Node
	}
	nc, js, err := dial(cfg, string(role), logger)
	if err != nil {
		return err
	}
	defer nc.Close()
	roles := roles{cfg: cfg, nc: nc, js: js, catalog: catalog, logger: logger, reg: newRegistry(), tracer: tracer}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	g, ctx := errgroup.WithContext(ctx)
	// stop ends what serves already when the role cannot start; a
	// goroutine's own failure is what ended the start then.
	stop := func(err error) error {
		cancel()
		if werr := g.Wait(); werr != nil && errors.Is(err, context.Canceled) {
			return werr
		}
		return err
	}
	var addrs Addrs
	var started atomic.Bool // ops /readyz: the role runs
	switch role {
	case config.RoleEdge:
		// The edge serves at once, as it serves through a NATS outage:
		// its /readyz checks NATS and the streams, and a request that
		// needs them gets a 503 until they are there.
		addrs.Edge, addrs.EdgeOps, err = roles.edge(ctx, g)
	case config.RoleWorker:
		addrs.Worker, err = roles.ops(ctx, g, "worker", cfg.Worker.Listen, "127.0.0.1:0", &started)
	case config.RoleCoordinator:
		addrs.Coordinator, err = roles.ops(ctx, g, "coordinator", cfg.Coordinator.Listen, coordinator.DefaultListen, &started)
	}
	if err != nil {
		return stop(err)
	}
	if role == config.RoleCoordinator && cfg.SetupNATS.HasCredentials() {
		if err := setUpAs(ctx, cfg, logger); err != nil {
			return stop(err)
		}
	}
	if err := setUp(ctx, cfg, js, logger); err != nil {
		return stop(err)
	}
	g.Go(func() error { return js.Run(ctx) })
	if role == config.RoleWorker || role == config.RoleCoordinator {
		if roles.livenessNC, err = connectLiveness(cfg, string(role), logger); err != nil {
			return stop(err)
		}
		defer roles.livenessNC.Close()
	}
	switch role {
	case config.RoleWorker:
		err = roles.worker(ctx, g)
	case config.RoleCoordinator:
		err = roles.coordinator(ctx, g)
	}
	if err != nil {
		return stop(err)
	}
	started.Store(true)
	ready(addrs)
	return g.Wait()
}

// runDev runs everything in one process: an embedded nats-server, the
// edge, one worker and the coordinator, and, unless providers are
// configured, the fake upstream as provider "mock".
func runDev(ctx context.Context, cfg config.Config, logger *slog.Logger, ready Ready) error {
	// Credentials of this process only, unless configured (natsserver/auth.go).
	embedded := cfg.EmbeddedNATS.WithRandomCredentials()
	srv, err := natsserver.Start(embedded)
	if err != nil {
		return err
	}
	defer func() {
		srv.Shutdown()
		srv.WaitForShutdown()
	}()
	cfg.NATS = natsconn.Config{URL: srv.ClientURL(), User: embedded.User, Password: embedded.Password}

	g, ctx := errgroup.WithContext(ctx)
	addrs := Addrs{NATS: srv.ClientURL()}
	if len(cfg.Providers) == 0 {
		if addrs.MockUpstream, err = startMock(ctx, g, cfg.MockUpstream, "127.0.0.1:0", logger); err != nil {
			return err
		}
		cfg.Providers = []provider.Config{cfg.MockUpstream.AsProvider("http://" + addrs.MockUpstream + "/v1")}
	}
	catalog, err := cfg.Catalog()
	if err != nil {
		return err
	}
	addrs.Model = catalog.Providers()[0].Models[0]
	tracer, stopTracing, err := startTracing(cfg, config.RoleDev, logger)
	if err != nil {
		return err
	}
	defer stopTracing()
	nc, js, err := connect(ctx, cfg, "dev", logger)
	if err != nil {
		return err
	}
	defer nc.Close()
	g.Go(func() error { return js.Run(ctx) })
	livenessNC, err := connectLiveness(cfg, "dev", logger)
	if err != nil {
		return err
	}
	defer livenessNC.Close()
	roles := roles{cfg: cfg, nc: nc, livenessNC: livenessNC, js: js, catalog: catalog, logger: logger, reg: newRegistry(), tracer: tracer}
	if addrs.Edge, addrs.EdgeOps, err = roles.edge(ctx, g); err != nil {
		return err
	}
	if err := roles.worker(ctx, g); err != nil {
		return err
	}
	if addrs.Worker, err = roles.ops(ctx, g, "worker", cfg.Worker.Listen, "127.0.0.1:0", nil); err != nil {
		return err
	}
	if err := roles.coordinator(ctx, g); err != nil {
		return err
	}
	if addrs.Coordinator, err = roles.ops(ctx, g, "coordinator", cfg.Coordinator.Listen, coordinator.DefaultListen, nil); err != nil {
		return err
	}
	ready(addrs)
	return g.Wait()
}

func runMock(ctx context.Context, cfg config.Config, logger *slog.Logger, ready Ready) error {
	g, ctx := errgroup.WithContext(ctx)
	addr, err := startMock(ctx, g, cfg.MockUpstream, "127.0.0.1:8081", logger)
	if err != nil {
		return err
	}
	ready(Addrs{MockUpstream: addr})
	return g.Wait()
}

func startMock(ctx context.Context, g *errgroup.Group, cfg config.MockUpstream, defaultListen string, logger *slog.Logger) (string, error) {
	m, err := mockupstream.New(cfg.Config, logger.With("role", "mock-upstream"))
	if err != nil {
		return "", err
	}
	ln, err := listen(cfg.Listen, defaultListen)
	if err != nil {
		return "", fmt.Errorf("app: mock upstream: %w", err)
	}
	g.Go(func() error { return m.Serve(ctx, ln) })
	return ln.Addr().String(), nil
}

// dial connects to NATS as name. It returns at once: the connection dials
// on in the background until NATS answers, and says so (natsconn). The
// JetStream it returns is the region's (configs/README.md "Regions"): outside the
// home region, shared state is the home's mirror; its Run reconciles.
func dial(cfg config.Config, name string, logger *slog.Logger) (*nats.Conn, *region.Regional, error) {
	return dialAs(cfg, cfg.NATS, name, logger)
}

// dialAs is dial with the connection config conn.
func dialAs(cfg config.Config, conn natsconn.Config, name string, logger *slog.Logger) (*nats.Conn, *region.Regional, error) {
	nc, plain, err := natsconn.Connect(conn.ForRole(name), "relay-"+name, logger)
	if err != nil {
		return nil, nil, err
	}
	js, err := region.NewRegional(plain, cfg.Streams, cfg.Region, logger.With("region", cfg.Region.Name))
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return nc, js, nil
}

// setUp sets up the streams. It is retried until the server's JetStream
// answers, so roles can start before NATS does.
func setUp(ctx context.Context, cfg config.Config, js *region.Regional, logger *slog.Logger) error {
	return awaitSetup(ctx, setupRetry, logger, func(ctx context.Context) error {
		if err := streams.Setup(ctx, js, cfg.Streams); err != nil {
			return err
		}
		if err := region.SetupRegion(ctx, js, cfg.Streams, cfg.Region); err != nil {
			return err
		}
		// Unset, the replicas depend on the servers (streams.Topology.On):
		// say what they came to.
		if t, err := cfg.Streams.On(ctx, js); err == nil {
			logger.Info("streams set up", "replicas", t.Replicas, "cluster", js.Conn().ConnectedClusterName())
		}
		return nil
	})
}

// setupWithin bounds `relay setup`: a refused JetStream request reads as a
// timeout, so it would otherwise wait forever for rights it lacks.
const setupWithin = 30 * time.Second

// runSetup is `relay setup`: it creates or updates the streams, the worker
// consumer and the buckets with the setup identity (config.SetupConn),
// then returns. The roles' own users may only look them up.
func runSetup(ctx context.Context, cfg config.Config, logger *slog.Logger, ready Ready) error {
	ctx, cancel := context.WithTimeout(ctx, setupWithin)
	defer cancel()
	nc, js, err := dialAs(cfg, cfg.SetupConn(), string(config.RoleSetup), logger)
	if err != nil {
		return err
	}
	defer nc.Close()
	if err := setUp(ctx, cfg, js, logger); err != nil {
		return fmt.Errorf("app: setup: %w", err)
	}
	ready(Addrs{})
	return nil
}

// setUpAs sets up with the setup identity (setup_nats) on a connection of
// its own, closed before the coordinator runs on its restricted one.
func setUpAs(ctx context.Context, cfg config.Config, logger *slog.Logger) error {
	logger = logger.With("conn", "setup")
	nc, js, err := dialAs(cfg, cfg.SetupConn(), string(config.RoleSetup), logger)
	if err != nil {
		return err
	}
	defer nc.Close()
	return setUp(ctx, cfg, js, logger)
}

// connect dials NATS and sets up the streams, for dev, whose embedded
// server answers at once.
func connect(ctx context.Context, cfg config.Config, name string, logger *slog.Logger) (*nats.Conn, *region.Regional, error) {
	nc, js, err := dial(cfg, name, logger)
	if err != nil {
		return nil, nil, err
	}
	if err := setUp(ctx, cfg, js, logger); err != nil {
		nc.Close()
		return nil, nil, err
	}
	return nc, js, nil
}

// setupTimeout bounds one attempt to set up the streams; setupRetry spaces
// the attempts.
const setupTimeout = 5 * time.Second

var setupRetry = backoff.Backoff{Config: backoff.Config{Base: 500 * time.Millisecond, Cap: 2 * time.Second}}

// awaitSetup calls setup until it succeeds, or ctx ends: then it returns
// ctx's error.
func awaitSetup(ctx context.Context, b backoff.Backoff, logger *slog.Logger, setup func(context.Context) error) error {
	for attempt := 0; ; attempt++ {
		setupCtx, cancel := context.WithTimeout(ctx, setupTimeout)
		err := setup(setupCtx)
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%w (last attempt: %v)", ctx.Err(), err)
		}
		if attempt%10 == 0 {
			logger.Warn("waiting for JetStream", "err", err)
		}
		if _, err := b.Wait(ctx, attempt, 0); err != nil {
			return err
		}
	}
}

// connectLiveness dials the connection that carries the worker
// heartbeats and their watchers (package liveness), apart from
// the main connection: a burst of publishes or reads on that one, or a
// slow consumer, cannot delay a heartbeat past liveness_timeout and have a
// live worker's requests handed over.
func connectLiveness(cfg config.Config, name string, logger *slog.Logger) (*nats.Conn, error) {
	nc, _, err := natsconn.Connect(cfg.NATS.ForRole(name), "relay-"+name+"-liveness", logger.With("conn", "liveness"))
	return nc, err
}

type roles struct {
	cfg config.Config
	nc  *nats.Conn
	// livenessNC carries heartbeats and liveness watchers (worker and
	// coordinator roles only).
	livenessNC *nats.Conn
	js         jetstream.JetStream
	catalog    *provider.Catalog
	logger     *slog.Logger
	// reg is the process's metrics registry (ops.go).
	reg *prometheus.Registry
	// tracer records the edge's and the worker's spans (tracing.go).
	tracer trace.TracerProvider
}

// edge serves the edge's API and its ops listener, and returns their
// addresses.
func (r roles) edge(ctx context.Context, g *errgroup.Group) (api, ops string, err error) {
	s, err := edge.New(r.cfg.Edge, edge.Deps{NC: r.nc, JS: r.js, Node: r.cfg.NATS.Node, Catalog: r.catalog, Logger: r.logger.With("role", "edge"), Registerer: r.reg, Gatherer: r.reg, Tracer: r.tracer})
	if err != nil {
		return "", "", err
	}
	ln, err := listen(r.cfg.Edge.Listen, "127.0.0.1:8080")
	if err != nil {
		return "", "", fmt.Errorf("app: edge: %w", err)
	}
	opsLn, err := listen(r.cfg.Edge.OpsListen, "127.0.0.1:0")
	if err != nil {
		ln.Close()
		return "", "", fmt.Errorf("app: edge ops: %w", err)
	}
	g.Go(func() error { return s.Serve(ctx, ln) })
	g.Go(func() error { return s.ServeOps(ctx, opsLn) })
	r.logger.Info("edge ops listening", "role", "edge", "addr", opsLn.Addr().String(), "paths", "/healthz /readyz /metrics")
	return ln.Addr().String(), opsLn.Addr().String(), nil
}

func (r roles) worker(ctx context.Context, g *errgroup.Group) error {
	gate, err := r.sharedGate(ctx)
	if err != nil {
		return err
	}
	w, err := worker.New(r.cfg.Worker, worker.Deps{
		NC: r.nc, LivenessNC: r.livenessNC, JS: r.js, Catalog: r.catalog,
		Logger:     r.logger.With("role", "worker"),
		Topology:   r.cfg.Streams,
		Gate:       gate,
		Registerer: r.reg,
		Tracer:     r.tracer,
	})
	if err != nil {
		return err
	}
	runGate(ctx, g, gate, w)
	// The end of ctx (SIGTERM, SIGINT) drains the worker rather than
	// stopping it: it takes no more requests, lets its streams finish
	// within worker.drain_timeout and hands the others over. Run gets a
	// context that does not end with ctx, so the drain decides when it
	// stops.
	g.Go(func() error { return w.Run(context.WithoutCancel(ctx)) })
	g.Go(func() error {
		<-ctx.Done()
		return w.Drain(context.Background())
	})
	g.Go(func() error { return reloadOnHangup(ctx, w, r.logger.With("role", "worker")) })
	return nil
}

// reloader re-reads the providers' api_keys_files: a worker, for its
// calls, and a coordinator, for its probes.
type reloader interface{ Reload() error }

// reloadOnHangup re-reads the api_keys_files of w on every SIGHUP until
// ctx ends, so keys rotate without a restart.
func reloadOnHangup(ctx context.Context, w reloader, logger *slog.Logger) error {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-hup:
			if err := w.Reload(); err != nil {
				logger.Warn("SIGHUP: keys not reloaded", "err", err)
				continue
			}
			logger.Info("SIGHUP: keys reloaded")
		}
	}
}

func (r roles) coordinator(ctx context.Context, g *errgroup.Group) error {
	breakers, err := r.breakerMetrics() // its probes' transitions count in relay_breaker_*
	if err != nil {
		return err
	}
	c, err := coordinator.New(r.cfg.Coordinator, coordinator.Deps{JS: r.js, LivenessNC: r.livenessNC, Topology: r.cfg.Streams, Catalog: r.catalog, Logger: r.logger.With("role", "coordinator"), Breakers: breakers})
	if err != nil {
		return err
	}
	g.Go(func() error { return c.Run(ctx) })
	g.Go(func() error { return reloadOnHangup(ctx, c, r.logger.With("role", "coordinator")) })
	return nil
}

func listen(addr, fallback string) (net.Listener, error) {
	if addr == "" {
		addr = fallback
	}
	return net.Listen("tcp", addr)
}

// serveOps serves /healthz, /readyz and /metrics (what metrics gathers)
// for a role without an HTTP API of its own. /healthz says the process
// serves and checks nothing else, so a NATS outage does not get the role
// restarted; /readyz is ready once NATS is connected, the streams are
// there and started (nil: from the start) is set.
func serveOps(ctx context.Context, ln net.Listener, nc *nats.Conn, js jetstream.JetStream, metrics prometheus.Gatherer, started *atomic.Bool) error {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(metrics, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		err := natsconn.Ready(nc)
		if err == nil {
			err = streams.Check(r.Context(), js)
		}
		if err == nil && started != nil && !started.Load() {
			err = errStarting
		}
		if err != nil {
			w.Header().Set("Retry-After", "1")
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "ready\n")
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(shutdownCtx)
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// errStarting is /readyz's answer while NATS and the streams are there but
// the role is still starting.
var errStarting = errors.New("starting")
