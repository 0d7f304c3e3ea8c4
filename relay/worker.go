package relay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/relay/chunklog"
	"github.com/relaydev/relay/relay/protocol"
	"github.com/relaydev/relay/relay/provider"
	"github.com/relaydev/relay/relay/upstream"
)

// Deps are what a worker is handed instead of creating it, so that tests and
// main wire the same code.
type Deps struct {
	// NC reads stream history (batched direct gets); required.
	NC *nats.Conn
	// JS pulls requests and appends frames; required.
	JS jetstream.JetStream
	// Catalog says which providers serve a model; required.
	Catalog *provider.Catalog
	// Upstream calls the providers; nil means a zero upstream.Client.
	Upstream *upstream.Client
	// Logger receives one line per job; nil discards.
	Logger *slog.Logger
	// Topology must be the one protocol.Setup was called with: its AckWait
	// decides how often a job reports progress.
	Topology protocol.Topology
	// Gate is asked before every upstream call and told how it ended
	// (circuit breakers, shared backoff, quotas); nil admits every call.
	Gate Gate
}

// Worker runs generation jobs. Create it with New and start it with Run.
type Worker struct {
	id          string
	maxInflight int
	js          jetstream.JetStream
	reader      *chunklog.Reader
	catalog     *provider.Catalog
	upstream    *upstream.Client
	gate        Gate
	logger      *slog.Logger
	// keys holds each provider's API keys, by provider name.
	keys map[string]*keyring
	// keysPoll is how often key files are checked; 0: never.
	keysPoll time.Duration
	// progressEvery is a quarter of AckWait: three reports can be lost
	// before the queue gives the request to another worker.
	progressEvery time.Duration
}

const (
	// pullWait bounds one pull, so that a pull the server forgot (after a
	// reconnect) is replaced in time.
	pullWait = 30 * time.Second
	// pullRetry is the pause after a failed pull (NATS down, consumer
	// missing), so a slot does not spin.
	pullRetry = time.Second
)

// New validates cfg and deps and returns a worker.
func New(cfg Config, deps Deps) (*Worker, error) {
	if err := cfg.Validate("worker"); err != nil {
		return nil, fmt.Errorf("relay: %w", err)
	}
	switch {
	case deps.NC == nil:
		return nil, errors.New("relay: Deps.NC is required")
	case deps.JS == nil:
		return nil, errors.New("relay: Deps.JS is required")
	case deps.Catalog == nil:
		return nil, errors.New("relay: Deps.Catalog is required")
	}
	cfg = cfg.withDefaults()
	if deps.Upstream == nil {
		deps.Upstream = &upstream.Client{}
	}
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.DiscardHandler)
	}
	if deps.Gate == nil {
		deps.Gate = openGate{}
	}
	keys := map[string]*keyring{}
	for _, p := range deps.Catalog.Providers() {
		r, err := newKeyring(p)
		if err != nil {
			return nil, fmt.Errorf("relay: %w", err)
		}
		keys[p.Name] = r
	}
	return &Worker{
		id:            cfg.ID,
		maxInflight:   cfg.MaxInflight,
		js:            deps.JS,
		reader:        chunklog.NewReader(deps.NC, ""),
		catalog:       deps.Catalog,
		upstream:      deps.Upstream,
		gate:          deps.Gate,
		logger:        deps.Logger.With("worker", cfg.ID),
		keys:          keys,
		keysPoll:      max(cfg.KeysPollInterval, 0),
		progressEvery: deps.Topology.WithDefaults().AckWait / 4,
	}, nil
}

// Run pulls and runs jobs until ctx is done, then stops pulling and waits
// for the running jobs to stop. Jobs stop at once, without a terminal frame
// and without acknowledging, so their requests go to another worker after
// AckWait. While it runs it also reloads api_keys_files that changed (see
// Reload). Run returns nil after a shutdown, and an error only if the
// worker consumer cannot be found at start (protocol.Setup was not run).
func (w *Worker) Run(ctx context.Context) error {
	cons, err := w.js.Consumer(ctx, protocol.RequestStream, protocol.WorkerConsumer)
	if ctx.Err() != nil {
		return nil
	}
	if err != nil {
		return fmt.Errorf("relay: consumer %s on %s: %w", protocol.WorkerConsumer, protocol.RequestStream, err)
	}
	w.logger.Info("worker started", "max_inflight", w.maxInflight)
	var wg sync.WaitGroup
	if w.keysPoll > 0 && w.hasKeyFiles() {
		wg.Go(func() { w.watchKeys(ctx, w.keysPoll) })
	}
	for range w.maxInflight {
		wg.Go(func() { w.slot(ctx, cons) })
	}
	wg.Wait()
	w.logger.Info("worker stopped")
	return nil
}

// slot runs one job at a time. It pulls a single message only when it is
// free, so a request never waits in a buffer while its AckWait runs out.
func (w *Worker) slot(ctx context.Context, cons jetstream.Consumer) {
	for ctx.Err() == nil {
		msg, err := w.pull(ctx, cons)
		switch {
		case err != nil:
			w.logger.Warn("pull failed", "err", err)
			wait(ctx, pullRetry)
		case msg == nil:
		case ctx.Err() != nil:
			// Received while shutting down: hand it back at once rather
			// than after AckWait, as nothing of it was started.
			if err := msg.Nak(); err != nil {
				w.logger.Warn("nak on shutdown failed", "err", err)
			}
		default:
			w.handle(ctx, msg)
		}
	}
}

// pull waits up to pullWait for one message; nil without error means none
// came or ctx ended.
func (w *Worker) pull(ctx context.Context, cons jetstream.Consumer) (jetstream.Msg, error) {
	pullCtx, cancel := context.WithTimeout(ctx, pullWait)
	defer cancel()
	msg, err := cons.Next(jetstream.FetchContext(pullCtx))
	switch {
	case err == nil:
		return msg, nil
	case pullCtx.Err() != nil, errors.Is(err, nats.ErrTimeout):
		return nil, nil
	}
	return nil, err
}

// handle runs the job of one request message, reporting progress on it
// until the job returns.
func (w *Worker) handle(ctx context.Context, msg jetstream.Msg) {
	stop := keepInProgress(msg, w.progressEvery, w.logger)
	defer stop()
	req, err := decodeRequest(msg.Data())
	if err != nil {
		// No stream to report the failure on, and a redelivery would fail
		// the same way.
		w.logger.Error("dropping malformed request", "err", err)
		if err := msg.Term(); err != nil {
			w.logger.Warn("term failed", "err", err)
		}
		return
	}
	newJob(w, msg, req).run(ctx)
}

// decodeRequest parses a work-queue message and checks that its stream id
// is safe to use as a subject token.
func decodeRequest(data []byte) (protocol.Request, error) {
	var req protocol.Request
	if err := json.Unmarshal(data, &req); err != nil {
		return req, fmt.Errorf("relay: decode request: %w", err)
	}
	if !protocol.ValidStreamID(req.StreamID) {
		return req, fmt.Errorf("relay: request has invalid stream id %q", req.StreamID)
	}
	return req, nil
}

// wait pauses for d or until ctx ends.
func wait(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
