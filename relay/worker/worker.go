package worker

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/relaydev/relay/relay/apikeys"
	"github.com/relaydev/relay/relay/backoff"
	"github.com/relaydev/relay/relay/chunklog"
	"github.com/relaydev/relay/relay/liveness"
	"github.com/relaydev/relay/relay/metrics"
	"github.com/relaydev/relay/relay/provider"
	"github.com/relaydev/relay/relay/runners"
	"github.com/relaydev/relay/relay/streams"
	"github.com/relaydev/relay/relay/tracing"
	"github.com/relaydev/relay/relay/upstream"
	"github.com/relaydev/relay/relay/wire"
)

// Deps are what a worker is handed instead of creating it, so that tests and
// main wire the same code.
type Deps struct {
	// NC reads stream history (batched direct gets), and carries cancel
	// notices; required.
	NC *nats.Conn
	// LivenessNC carries the worker's heartbeats and its watch of its
	// peers' (package liveness): a connection of its own, so
	// that neither a busy NC nor a slow consumer on it delays them. Nil:
	// NC.
	LivenessNC *nats.Conn
	// JS pulls requests and appends frames; required.
	JS jetstream.JetStream
	// Catalog says which providers serve a model; required.
	Catalog *provider.Catalog
	// Upstream calls the providers; nil means a client with the default
	// bounds whose transport keeps an idle connection per slot to each
	// provider and calls those with http2_prior_knowledge over h2c
	// (upstream.NewTransport(max_inflight)). A client with another
	// transport calls every plain-http provider over HTTP/1.1.
	Upstream *upstream.Client
	// Logger receives one line per job; nil discards.
	Logger *slog.Logger
	// Topology must be the one streams.Setup was called with: its AckWait
	// decides how often a job reports progress, and it sizes the handover
	// bucket if the worker creates it.
	Topology streams.Topology
	// Gate is asked before every upstream call and told how it ended
	// (circuit breakers, shared backoff, quotas); nil admits every call.
	Gate Gate
	// Registerer receives the worker's metrics (relay/metrics); nil keeps
	// them in a registry of their own.
	Registerer prometheus.Registerer
	// Tracer records a span per job, claim and upstream attempt
	// (tracing.go); nil records none, but still forwards the trace a
	// request came with to its provider.
	Tracer trace.TracerProvider
}

// Worker runs generation jobs. Create it with New, start it with Run (once)
// and stop it with Drain, or by ending Run's context.
type Worker struct {
	id          string
	instance    string
	maxInflight int
	nc          *nats.Conn
	livenessNC  *nats.Conn
	js          jetstream.JetStream
	reader      *chunklog.Reader
	catalog     *provider.Catalog
	upstream    *upstream.Client
	gate        Gate
	metrics     *metrics.Worker
	tracer      trace.Tracer
	logger      *slog.Logger
	topology    streams.Topology
	// keys holds each provider's API keys, by provider name.
	keys map[string]*apikeys.Ring
	// hedges are the hedge budgets of the models that hedge (hedge.go).
	hedges *hedgeBudgets
	// runners run what jobs do in bursts off their own goroutines: the
	// appends of chunks, claims, decoding requests, opening calls, ending
	// streams (relay/runners, Worker.aside).
	runners *runners.Pool
	// keysPoll is how often key files are checked; 0: never.
	keysPoll time.Duration
	// progress reports the requests held every quarter of AckWait: three
	// reports can be lost before the queue gives a request to another
	// worker.
	progress *progress
	// pullWait bounds one pull: at most maxPullWait, and at most half the
	// liveness timeout, so that a worker paused (SIGSTOP) holds no pull
	// by the time its requests are handed over; otherwise the server
	// would deliver them straight back to it.
	pullWait time.Duration
	// pullRetry spaces the pulls of a slot whose pulls fail (see the
	// package's pullRetry).
	pullRetry backoff.Backoff
	// pulls holds a token for every pull this worker has waiting at the
	// server (see maxWaitingPulls).
	pulls chan struct{}
	// offers hands a request taken from an offer to a slot waiting for
	// one of the pull tokens (offer.go); unbuffered, so that an offer is
	// taken only when a slot is free to run it.
	offers chan offer
	// heartbeatEvery is the heartbeat interval, 0 without liveness;
	// livenessTimeout is declared in every heartbeat.
	heartbeatEvery, livenessTimeout time.Duration
	watchPeers                      bool
	drainTimeout                    time.Duration
	appendRetry                     time.Duration

	jobs *inflight
	// answers is the cache of answers (answer_cache.go).
	answers *answerCache
	// meta and handovers are set by Run: the stream metadata (read for
	// a cancellation) and the handover records.
	meta, handovers jetstream.KeyValue
	// usage records streams' usage (usage_ledger.go).
	usage usageLedger
	// commits groups the jobs' appends into batches, on a replicated
	// chunk stream; nil: each append goes alone (set by Run).
	commits *chunklog.Committer
	// settler records the usage of the streams that ended and acks their
	// requests, together on a replicated cluster (set by Run).
	settler *settler

	// Lifecycle: draining is closed when Drain is first called; done when
	// Run returned (or Drain was called and Run never ran).
	mu        sync.Mutex
	running   bool
	drainOnce sync.Once
	draining  chan struct{}
	doneOnce  sync.Once
	done      chan struct{}
}

// maxPullWait bounds one pull: a pull the server forgot (after a
// restart) is replaced within it.
const maxPullWait = time.Second

// pullRetry spaces the pulls after a failed pull (NATS down, consumer
// missing), so a slot does not spin.
var pullRetry = backoff.Backoff{Config: backoff.Config{Base: time.Second, Cap: 2 * time.Second}}

// New validates cfg and deps and returns a worker.
func New(cfg Config, deps Deps) (*Worker, error) {
	if err := cfg.Validate("worker"); err != nil {
		return nil, fmt.Errorf("worker: %w", err)
	}
	switch {
	case deps.NC == nil:
		return nil, errors.New("worker: Deps.NC is required")
	case deps.JS == nil:
		return nil, errors.New("worker: Deps.JS is required")
	case deps.Catalog == nil:
		return nil, errors.New("worker: Deps.Catalog is required")
	}
	cfg = cfg.withDefaults()
	if deps.Upstream == nil {
		deps.Upstream = upstream.NewClient(&http.Client{Transport: upstream.NewTransport(cfg.MaxInflight)})
	}
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.DiscardHandler)
	}
	if deps.Gate == nil {
		deps.Gate = openGate{}
	}
	m, err := newMetrics(deps.Registerer, deps.Catalog, cfg.Tenants)
	if err != nil {
		return nil, fmt.Errorf("worker: %w", err)
	}
	reporter, _ := deps.Gate.(keyReporter)
	deps.Gate = meteredGate{Gate: deps.Gate, m: m}
	keys := map[string]*apikeys.Ring{}
	for _, p := range deps.Catalog.Providers() {
		r, err := apikeys.NewRing(p)
		if err != nil {
			return nil, fmt.Errorf("worker: %w", err)
		}
		keys[p.Name] = r
	}
	logger := deps.Logger.With("worker", cfg.ID)
	w := &Worker{
		id:              cfg.ID,
		instance:        newInstance(),
		maxInflight:     cfg.MaxInflight,
		nc:              deps.NC,
		livenessNC:      cmp.Or(deps.LivenessNC, deps.NC),
		js:              deps.JS,
		reader:          chunklog.NewReader(deps.NC, ""),
		catalog:         deps.Catalog,
		upstream:        deps.Upstream,
		gate:            deps.Gate,
		metrics:         m,
		tracer:          tracing.Tracer(deps.Tracer),
		logger:          logger,
		topology:        deps.Topology,
		keys:            keys,
		keysPoll:        max(cfg.KeysPollInterval, 0),
		progress:        newProgress(deps.Topology.WithDefaults().AckWait/4, logger),
		pullWait:        min(maxPullWait, cfg.LivenessTimeout/2),
		pulls:           make(chan struct{}, maxWaitingPulls),
		offers:          make(chan offer),
		pullRetry:       pullRetry,
		heartbeatEvery:  max(cfg.HeartbeatInterval, 0),
		livenessTimeout: cfg.LivenessTimeout,
		watchPeers:      !cfg.DisablePeerWatch,
		drainTimeout:    cfg.DrainTimeout,
		appendRetry:     cfg.AppendRetry,
		answers:         &answerCache{streams.NewBucket(deps.JS, wire.AnswerBucket, 0)},
		usage:           newUsageLedger(deps.JS),
		hedges:          newHedgeBudgets(),
		runners:         runners.New(runners.Idle),
		draining:        make(chan struct{}),
		done:            make(chan struct{}),
	}
	w.jobs = newInflight(w.progress.keep)
	if reporter != nil {
		// The checks of the keys reach GET /v1/relay/status.
		reporter.ReportKeys(w.keyReport)
	}
	return w, nil
}

// newInstance names one worker process in heartbeats.
func newInstance() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Run pulls and runs jobs until the worker is drained (Drain) or ctx
// ends. When ctx ends, every running job stops at once and hands its
// request to another worker, which continues the stream (see Drain).
// While it runs, the worker publishes its heartbeat, watches its peers'
// (unless DisablePeerWatch), follows cancel notices, and reloads
// api_keys_files that changed (see Reload). Run returns nil after a
// shutdown, and an error only if the worker consumer or the buckets cannot
// be found at start (streams.Setup was not run).
func (w *Worker) Run(ctx context.Context) error {
	if !w.begin() {
		return nil
	}
	defer w.finish()
	defer w.upstream.CloseIdleConnections()
	cons, err := w.js.Consumer(ctx, wire.RequestStream, wire.WorkerConsumer)
	if err == nil {
		w.meta, err = w.js.KeyValue(ctx, wire.MetaBucket)
	}
	if err == nil {
		w.handovers, err = streams.OpenHandovers(ctx, w.js, w.topology)
	}
	if err == nil {
		err = w.groupCommits(ctx)
	}
	if ctx.Err() != nil {
		return nil
	}
	if err != nil {
		return fmt.Errorf("worker: %w", err)
	}
	cancels, err := w.followCancels()
	if err != nil {
		return err
	}
	defer cancels.Unsubscribe()
	fwd, err := w.followForwards(ctx) // forward.go
	if err != nil {
		return err
	}
	defer fwd.stop(w.drainTimeout)
	stopTakingOffers, stopOffers, err := w.followOffers() // offer.go
	if err != nil {
		return err
	}
	defer stopOffers()
	w.logger.Info("worker started", "max_inflight", w.maxInflight, "instance", w.instance,
		"heartbeat_interval", w.heartbeatEvery, "liveness_timeout", w.livenessTimeout, "watch_peers", w.watchPeers,
		"group_commit", w.commits != nil)

	// Jobs write to the chunk log until they are done, also when ctx
	// ended: a stopping job still publishes what it received and hands
	// its request over, within the retry bound.
	jobCtx := context.WithoutCancel(ctx)
	pulling, stopPulling := context.WithCancel(jobCtx)
	defer stopPulling()
	slotsDone := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
		case <-w.draining:
		}
		stopPulling()
		stopTakingOffers()
		fwd.unsubscribe()
		// A drain hands the streams over when its time is up (Drain); the
		// end of ctx, also during a drain, does at once.
		select {
		case <-ctx.Done():
			w.jobs.handOverAll()
		case <-slotsDone:
		}
	}()

	// Background tasks outlive the slots, so the heartbeat lists the
	// streams being handed over until they are.
	bgCtx, stopBackground := context.WithCancel(jobCtx)
	stopBeat := make(chan struct{})
	var bg sync.WaitGroup
	bg.Go(func() { w.progress.run(bgCtx) })
	if w.keysPoll > 0 && w.hasKeyFiles() {
		bg.Go(func() { w.watchKeys(bgCtx, w.keysPoll) })
	}
	if w.heartbeatEvery > 0 {
		resync, unsubscribe := w.followResyncs()
		defer unsubscribe()
		// Answering probes before the first beat: a watcher never finds
		// this worker late without a way to ask it.
		if stop, err := liveness.AnswerProbes(w.livenessNC, w.instance); err != nil {
			w.logger.Warn("not answering liveness probes: a late heartbeat will have this worker's requests handed over", "err", err)
		} else {
			defer stop()
		}
		bg.Go(func() { w.heartbeat(resync).run(stopBeat) })
	}
	if w.watchPeers {
		bg.Go(func() {
			wa := liveness.Watcher{JS: w.js, NC: w.livenessNC, Topology: w.topology, Self: w.instance, Name: w.id, Logger: w.logger}
			if err := wa.Run(bgCtx); err != nil {
				w.logger.Warn("not watching peers", "err", err)
			}
		})
	}

	// Keys are checked before they take traffic (keycheck.go).
	w.checkKeys(ctx, bgCtx, &bg)

	var slots sync.WaitGroup
	for range w.maxInflight {
		slots.Go(func() { w.slot(jobCtx, pulling, cons) })
	}
	slots.Wait()
	w.settler.close()
	close(slotsDone)
	close(stopBeat)
	stopBackground()
	bg.Wait()
	w.logger.Info("worker stopped")
	return nil
}

// begin marks the worker running, unless it was drained before it ran.
func (w *Worker) begin() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	select {
	case <-w.draining:
		w.finish()
		return false
	default:
	}
	w.running = true
	return true
}

func (w *Worker) finish() { w.doneOnce.Do(func() { close(w.done) }) }

// Closed is closed once the worker stopped: Run returned, or Drain was
// called before Run.
func (w *Worker) Closed() <-chan struct{} { return w.done }

// slot runs one job at a time, under ctx. It pulls a single message only
// when it is free, so a request never waits in a buffer while its AckWait
// runs out. Once pulling ends it pulls no more. A pull is never cut short:
// the server could deliver a message to it at that very moment, which
// would then wait for AckWait; it runs out within pullWait instead, and
// what it brings is given back.
func (w *Worker) slot(ctx, pulling context.Context, cons jetstream.Consumer) {
	stop := pulling.Done()
	// failures counts the pulls that failed in a row: the exponent of the
	// backoff before the next.
	failures := 0
	for {
		select {
		case <-stop:
			return
		default:
		}
		msg, offered, err := w.pull(ctx, stop, cons)
		stopped := false
		select {
		case <-stop:
			stopped = true
		case <-w.draining:
			// Drain closes stop a moment later; a request must not slip
			// in between.
			stopped = true
		default:
		}
		if err == nil {
			failures = 0
		}
		switch {
		case err != nil:
			w.pullFailed(ctx, pulling, err, failures)
			failures++
		case offered != nil && !stopped:
			w.handleOffered(ctx, *offered)
		case offered != nil:
			w.dropOffered(*offered)
		case msg == nil:
		case stopped:
			w.handBack(msg)
		default:
			w.handle(ctx, msg)
		}
	}
}

// pullFailed logs the failures-th pull failure in a row, err, and waits
// the backoff before the next pull, or until pulling ends.
func (w *Worker) pullFailed(ctx, pulling context.Context, err error, failures int) {
	level := slog.LevelWarn
	if !w.nc.IsConnected() {
		// Every slot fails while NATS is away; the connection logs that
		// once.
		level = slog.LevelDebug
	}
	d := w.pullRetry.Delay(failures, 0)
	w.logger.Log(ctx, level, "pull failed", "err", err, "retry_in", d)
	// Ends early once pulling does; the slot then stops.
	_ = w.pullRetry.Sleep(pulling, d)
}

// handBack gives back a request received while stopping, at once rather
// than after AckWait, as nothing of it was started.
func (w *Worker) handBack(msg jetstream.Msg) {
	if err := msg.Nak(); err != nil {
		w.logger.Warn("nak on shutdown failed", "err", err)
	}
}

// maxWaitingPulls caps the pulls one worker keeps waiting at the server,
// however many of its slots are free. The server hands messages to waiting
// pulls in the order they arrived; if every free slot kept a pull waiting,
// the worker that started first would take a whole burst (up to its
// max_inflight) before any other worker got one. With a few pulls each,
// workers take turns, and a dead worker strands few streams.
const maxWaitingPulls = 4

// errPullDisconnected: the worker's NATS connection is down; its slots
// retry after a backoff (pullRetry).
var errPullDisconnected = errors.New("worker: not pulling while disconnected from NATS")

// pull waits up to pullWait for one message; nil without error means none
// came, ctx ended or stop closed while it waited for one of the worker's
// pull tokens. While it waits for a token it takes an offered request
// instead, if one comes.
func (w *Worker) pull(ctx context.Context, stop <-chan struct{}, cons jetstream.Consumer) (jetstream.Msg, *offer, error) {
	select {
	case w.pulls <- struct{}{}:
	case o := <-w.offers:
		return nil, &o, nil
	case <-ctx.Done():
		return nil, nil, nil
	case <-stop:
		return nil, nil, nil
	}
	defer func() { <-w.pulls }()
	// A pull sent while the connection is down waits in nats.go's
	// reconnect buffer and reaches the server after the reconnect, when
	// this worker may have stopped waiting for it: the server would hand
	// the next request to a pull nobody reads, redelivered only after
	// AckWait. So no pull is sent while disconnected.
	if !w.nc.IsConnected() {
		return nil, nil, errPullDisconnected
	}
	// The pull ends by the server's expiry, never by a client-side
	// deadline: nats.go asks the server to expire a pull bounded by a
	// context a little before the context ends, and a message the server
	// delivers in between arrives after the client stopped listening. It
	// is lost to this worker and redelivered only after AckWait.
	// FetchMaxWait waits a second past the expiry for the server's answer.
	msg, err := cons.Next(jetstream.FetchMaxWait(w.pullWait))
	switch {
	case err == nil:
		return msg, nil, nil
	case errors.Is(err, nats.ErrTimeout):
		return nil, nil, nil
	}
	return nil, nil, err
}

// handle runs the job of one request message under ctx, reporting
// progress on it until the job is done with it.
func (w *Worker) handle(ctx context.Context, msg jetstream.Msg) {
	stop := w.progress.keep(msg)
	defer stop()
	var j *job
	w.aside(func() { j = w.startJob(ctx, msg, stop) })
	if j == nil {
		return
	}
	defer w.jobs.remove(j)
	j.run()
}

// startJob decodes msg and adds its job to the worker's, nil if msg is
// malformed (it is then terminated) or was passed on to the worker that
// took its request from an offer (passOn).
func (w *Worker) startJob(ctx context.Context, msg jetstream.Msg, stopProgress func()) *job {
	if w.passOn(msg) {
		return nil
	}
	req, err := decodeRequest(msg.Data())
	if err != nil {
		// No stream to report the failure on, and a redelivery would fail
		// the same way.
		w.logger.Error("dropping malformed request", "err", err)
		if err := msg.Term(); err != nil {
			w.logger.Warn("term failed", "err", err)
		}
		return nil
	}
	j := newJob(ctx, w, msg, req, stopProgress)
	w.jobs.add(j)
	return j
}

// handleOffered runs the job of a request taken from an offer, under ctx.
func (w *Worker) handleOffered(ctx context.Context, o offer) {
	var j *job
	w.aside(func() {
		j = offeredJob(ctx, w, o)
		w.jobs.add(j)
	})
	defer w.jobs.remove(j)
	j.run()
}

// decodeRequest parses a work-queue message and checks that its stream id
// is safe to use as a subject token, and a generation's: a Durable
// Stream's frames are its edges' to write.
func decodeRequest(data []byte) (wire.Request, error) {
	req, err := wire.DecodeRequest(data)
	if err != nil {
		return req, fmt.Errorf("worker: %w", err)
	}
	if !wire.ValidGenerationID(req.StreamID) {
		return req, fmt.Errorf("worker: request has invalid stream id %q", req.StreamID)
	}
	return req, nil
}

// groupCommits sets up the grouping of the jobs' appends when the chunk
// stream is replicated and takes atomic batches (chunklog.Batches), and
// of their settlements when it is replicated (settle.go).
func (w *Worker) groupCommits(ctx context.Context) error {
	s, err := w.js.Stream(ctx, wire.ChunkStream)
	if err != nil {
		return err
	}
	cfg := s.CachedInfo().Config
	if chunklog.Batches(cfg) {
		w.commits = chunklog.NewCommitter(w.js.Conn(), w.runners.Run, w.metrics.AppendBatch)
	}
	linger := time.Duration(0)
	if cfg.Replicas > 1 {
		linger = settleLinger
	}
	w.settler = newSettler(linger, w.runners.Run)
	return nil
}

// newWriter returns the writer of a stream whose last frame is stored at
// JetStream sequence last and whose last chunk is seq.
func (w *Worker) newWriter(streamID string, last, seq uint64) *chunklog.Writer {
	if w.commits != nil {
		return w.commits.NewWriter(w.js, w.reader, streamID, last, seq)
	}
	return chunklog.NewWriter(w.js, w.reader, streamID, last, seq)
}
