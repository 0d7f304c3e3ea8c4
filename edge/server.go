package edge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/gorilla/websocket"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/relaydev/relay/edge/follow"
	"github.com/relaydev/relay/relay/chunklog"
	"github.com/relaydev/relay/relay/provider"
	"github.com/relaydev/relay/relay/runners"
	"github.com/relaydev/relay/relay/tracing"
	"github.com/relaydev/relay/relay/wire"
)

// Deps are the edge's connections and collaborators.
type Deps struct {
	NC      *nats.Conn
	JS      jetstream.JetStream
	Catalog *provider.Catalog
	// Logger may be nil (discard).
	Logger *slog.Logger
	// Registerer receives the edge's metrics (relay/metrics), and Gatherer
	// is what GET /metrics serves (and the dashboard reads breakers from);
	// both nil: a registry of the edge's own. A Registerer that is also a
	// Gatherer serves as both.
	Registerer prometheus.Registerer
	Gatherer   prometheus.Gatherer
	// Tracer records a span per API request (tracing.go); nil: none.
	Tracer trace.TracerProvider
	// Node names the edge in the fleet's quota state (its demand key);
	// zero: "edge-<random>". An edge with a NATS identity of its own
	// (nats.node) may write the demand key of that name only.
	Node string
}

// Server is one edge: the HTTP API over the relay's streams.
type Server struct {
	cfg      Config
	js       jetstream.JetStream
	nc       *nats.Conn
	catalog  *provider.Catalog
	log      *slog.Logger
	tracer   trace.Tracer
	node     string // Deps.Node
	reader   *chunklog.Reader
	parts    *partitions
	meta     *metaStore
	cursors  *cursorKeys
	hub      *follow.Hub
	clients  *clients
	runners  *runners.Pool // serve requests and taken-over SSE streams (runner_handler.go, serve_sse_conn.go)
	orphans  *orphans
	upgrader websocket.Upgrader
	handler  http.Handler
	auth     *authenticator
	tokens   *resumeTokens
	cors     corsPolicy
	hosts    hostPolicy // admit_hosts.go
	idem     *idempotencyStore
	wsStats  wsStats
	obs      *observer // metrics, dashboard, session log lines (observe.go)
	// cluster is the shared provider state the edge checks before it
	// queues a generation (admit_cluster.go), started on first use.
	cluster lazyCluster
	// conns are the shares of the connection cap (admit_conn_limit.go).
	conns connShares
	// spend holds the tenants' budgets and the usage ledger (admit_spend.go).
	spend *spendGuard
	// denials ends the reads of /v1/relay/status the NATS server denies
	// (denials.go).
	denials *denials
	// now is the clock of idempotency windows; tests move it.
	now func() time.Time

	// cancelWait is how long a cancellation waits for the end frame: the
	// constant cancelWait, which tests shorten.
	cancelWait time.Duration
	// forwardSilence is how long a forwarded request waits for its
	// worker's next message: wire.ForwardSilence, which tests shorten.
	forwardSilence time.Duration
}

// Timeouts of the HTTP server. Streaming responses have no overall write
// timeout: each batch gets writeTimeout instead.
const (
	readHeaderTimeout = 10 * time.Second
	idleTimeout       = 2 * time.Minute
	writeTimeout      = 10 * time.Second
	shutdownTimeout   = 10 * time.Second
)

// New validates cfg and returns an edge. It starts the goroutine that routes
// live frames; that goroutine stops when deps.NC is closed.
func New(cfg Config, deps Deps) (*Server, error) {
	if err := cfg.Validate("edge"); err != nil {
		return nil, err
	}
	if deps.NC == nil || deps.JS == nil || deps.Catalog == nil {
		return nil, errors.New("edge: Deps.NC, Deps.JS and Deps.Catalog are required")
	}
	log := deps.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := cfg.Spend.checkModels(deps.Catalog); err != nil { // admit_spend_config.go
		return nil, err
	}
	for i, k := range cfg.APIKeys {
		for j, m := range k.Models {
			if !deps.Catalog.Serves(m) {
				return nil, fmt.Errorf("edge.api_keys[%d].models[%d]: %q is not served by any provider", i, j, m)
			}
		}
	}
	cfg = cfg.WithDefaults()
	tokens, random := newResumeTokens(cfg.ResumeTokenSecret, cfg.ResumeTokenTTL)
	if random {
		log.Info("edge.resume_token_secret is not set: resume tokens are signed with a random key of this process, " +
			"so no other edge (and no restart of this one) accepts them; set it, the same on every edge, to run several")
	}
	reader := chunklog.NewReader(deps.NC, "")
	s := &Server{
		cfg:     cfg,
		js:      deps.JS,
		nc:      deps.NC,
		catalog: deps.Catalog,
		log:     log,
		tracer:  tracing.Tracer(deps.Tracer),
		node:    deps.Node,
		reader:  reader,
		parts:   newPartitions(deps.JS),
		meta:    newMetaStore(deps.JS, reader),
		cursors: newCursorKeys(deps.JS),
		hub:     follow.New(deps.NC, reader, deps.JS.Conn() == deps.NC, log),
		clients: newClients(),
		runners: runners.New(runners.Idle),
		auth:    newAuthenticator(cfg.APIKeys, cfg.AllowAnonymous),
		tokens:  tokens,
		cors:    newCORSPolicy(cfg.CORSAllowedOrigins),
		hosts:   newHostPolicy(cfg.Listen, cfg.AllowedHosts),
		idem:    newIdempotencyStore(deps.JS),
		denials: watchDenials(deps.JS.Conn()),
		spend:   newSpendGuard(cfg),
		conns:   sharesOf(cfg),
		now:     time.Now,

		cancelWait:     cancelWait,
		forwardSilence: wire.ForwardSilence,
	}
	s.orphans = newOrphans(
		func(ctx context.Context, id string) (bool, error) { return followed(ctx, deps.NC, id) },
		func(ctx context.Context, tenant, id string) (chunklog.Entry, *wire.Error) {
			return s.cancel(ctx, tenant, id, "id")
		},
		log,
	)
	s.upgrader = websocket.Upgrader{
		HandshakeTimeout: readHeaderTimeout,
		// Chosen when the client offers it, as a browser sending its key
		// as a subprotocol must (admit_auth.go); the key's own is never echoed.
		Subprotocols: []string{wsProtocol},
		CheckOrigin:  s.checkOrigin,
		Error: func(w http.ResponseWriter, _ *http.Request, status int, reason error) {
			writeError(w, &wire.Error{Message: reason.Error(), Type: wire.TypeInvalidRequest, Status: status})
		},
	}
	obs, err := newObserver(s, deps)
	if err != nil {
		return nil, err
	}
	s.obs = obs
	// CORS answers preflights, which carry no credentials, before
	// authentication; routes see the principal in the request context.
	// withDialect marks the Messages API's responses, whose errors have
	// Anthropic's shape (messages_errors.go).
	s.handler = s.onRunners(withDialect(s.withBodyDeadline(s.instrument(s.traced(s.withAllowedHosts(s.withCORS(s.withAuthentication(s.routes()))))))))
	return s, nil
}

// Handler serves the edge's HTTP API.
func (s *Server) Handler() http.Handler { return s.handler }

// Serve serves HTTP on ln until ctx is done, then drains (serve_drain.go): it
// stops accepting, tells every live client to reconnect elsewhere and
// resume from its last cursor, and waits up to shutdownTimeout for requests
// and WebSockets to finish. It returns nil after a clean shutdown,
// context.DeadlineExceeded when time ran out.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	defer s.stopCluster() // admit_cluster.go
	defer s.stopSpend()   // admit_spend.go
	// The cluster state starts now rather than with the first request, so
	// that the tenants' sharing knows the workers' slots when a burst of
	// requests comes (admit_tenant_gate.go).
	s.clusterState()
	// The buckets a new request writes to are looked up now, from their
	// leaders: a first request that came during an election would wait
	// for one. So is the cursor key, which every stream served needs.
	go func() {
		wctx, cancel := context.WithTimeout(ctx, submitWait)
		defer cancel()
		_, _ = s.meta.bucket(wctx)
		_, _ = s.cursors.get(wctx)
		if s.cfg.IdempotencyWindow >= 0 {
			_, _ = s.idem.bucket(wctx)
		}
	}()
	srv := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: readHeaderTimeout,
		IdleTimeout:       idleTimeout,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	// Shutdown runs this once it closed the listener, so a client told to
	// reconnect cannot land on this edge again.
	srv.RegisterOnShutdown(s.clients.close)
	served := make(chan error, 1)
	// The cap (admit_conn_limit.go) is under the listener that gives taken-over
	// connections back (serve_keepalive.go), which tells it the idle ones.
	reuse := newReuseListener(ln)
	if capped := limitConnections(ln, s.conns, reuse.reclaimIdle); capped != nil {
		reuse.Listener = capped
	}
	srv.ConnState = reuse.connState
	srv.ConnContext = withConn
	ln = reuse
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		s.orphans.close()
		return fmt.Errorf("edge: serve: %w", err)
	case <-ctx.Done():
	}
	s.orphans.close()
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	err := srv.Shutdown(sctx)
	<-served // http.ErrServerClosed
	// Shutdown starts clients.close without waiting for it; it is
	// idempotent, and needed before clients.wait.
	s.clients.close()
	if err != nil {
		return err
	}
	// Hijacked WebSockets and SSE streams (serve_sse_conn.go) are not
	// Shutdown's to wait for.
	return s.clients.wait(sctx)
}
