package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/relay/backoff"
	"github.com/relaydev/relay/relay/chunklog"
	"github.com/relaydev/relay/relay/fleet"
	"github.com/relaydev/relay/relay/mockupstream"
	"github.com/relaydev/relay/relay/natsconn"
	"github.com/relaydev/relay/relay/provider"
	"github.com/relaydev/relay/relay/relaytest"
	"github.com/relaydev/relay/relay/streams"
	"github.com/relaydev/relay/relay/wire"
)

// waitFor bounds every Eventually in these tests: generous for -race on two
// cores, and only reached when a test fails.
const waitFor = 20 * time.Second

// setup configures one test's world.
type setup struct {
	mock     mockupstream.Config
	worker   Config
	topology streams.Topology
	// wrap, if set, wraps the mock's handler, served by an http.Server on
	// the loopback listener instead of by mock.Serve.
	wrap func(http.Handler) http.Handler
	// providers, if set, returns the providers given the mock's base URL;
	// the default is provider "mock" serving mock-1 with fastRetry.
	providers func(mockURL string) []provider.Config
	models    []provider.Model
	gate      Gate
	// srv is the NATS server; nil starts one.
	srv *server.Server
	// noWorker starts no worker: the test starts its own with startWorker.
	noWorker bool
}

// fastRetry keeps the backoff of tests short; what the delays are is the
// backoff package's tests' concern.
var fastRetry = backoff.Config{Base: 5 * time.Millisecond, Cap: 20 * time.Millisecond}

// harness is an embedded NATS with the relay's streams, a mock upstream on
// a loopback listener, and a running worker.
type harness struct {
	t        *testing.T
	srv      *server.Server
	nc       *nats.Conn
	js       jetstream.JetStream
	reader   *chunklog.Reader
	mock     *mockupstream.Server
	logs     *logStore
	logger   *slog.Logger
	catalog  *provider.Catalog
	topology streams.Topology
	gate     Gate
	// stop shuts the default worker down and waits for Run to return.
	stop func()
}

// testWorker is a worker a test started.
type testWorker struct {
	*Worker
	// stop ends Run's context (a hard stop) and waits for Run to return.
	stop func()
	// ran is closed when Run returned.
	ran chan struct{}
}

func start(t *testing.T, s setup) *harness {
	t.Helper()
	if s.worker.ID == "" {
		s.worker.ID = "test-worker"
	}
	if s.srv == nil {
		s.srv = relaytest.NATS(t)
	}
	nc, js := relaytest.Connect(t, s.srv, s.topology)
	h := &harness{t: t, srv: s.srv, nc: nc, js: js, reader: chunklog.NewReader(nc, ""), logs: &logStore{}, topology: s.topology, gate: s.gate}
	logger := slog.New(&recorder{inner: relaytest.Logger(t).Handler(), store: h.logs})
	h.logger = logger

	mock, err := mockupstream.New(s.mock, logger)
	if err != nil {
		t.Fatal(err)
	}
	h.mock = mock
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mockCtx, stopMock := context.WithCancel(context.Background())
	served := make(chan error, 1)
	if s.wrap == nil {
		go func() { served <- mock.Serve(mockCtx, ln) }()
	} else {
		hs := &http.Server{Handler: s.wrap(mock.Handler())}
		go func() { served <- hs.Serve(ln) }()
		go func() {
			<-mockCtx.Done()
			hs.Close()
		}()
	}
	t.Cleanup(func() {
		stopMock()
		if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("mock upstream: %v", err)
		}
	})

	mockURL := "http://" + ln.Addr().String() + "/v1"
	providers := []provider.Config{{
		Name:    "mock",
		BaseURL: mockURL,
		APIKeys: []string{"key-1"},
		Models:  []string{"mock-1"},
		Retry:   fastRetry,
	}}
	if s.providers != nil {
		providers = s.providers(mockURL)
	}
	catalog, err := provider.NewCatalog(providers, s.models...)
	if err != nil {
		t.Fatal(err)
	}
	h.catalog = catalog
	h.stop = func() {}
	if !s.noWorker {
		h.stop = h.startWorker(s.worker, nc).stop
	}
	return h
}

// startWorker runs a worker with cfg on nc (the harness's connection if
// nil) until the test ends.
func (h *harness) startWorker(cfg Config, nc *nats.Conn) *testWorker {
	h.t.Helper()
	js := h.js
	if nc == nil {
		nc = h.nc
	} else if nc != h.nc {
		var err error
		if js, err = jetstream.New(nc); err != nil {
			h.t.Fatal(err)
		}
	}
	return h.runWorker(cfg, Deps{NC: nc, JS: js, Catalog: h.catalog, Logger: h.logger, Topology: h.topology, Gate: h.gate})
}

// runWorker runs a worker with cfg and deps until the test ends.
func (h *harness) runWorker(cfg Config, deps Deps) *testWorker {
	h.t.Helper()
	if cfg.ID == "" {
		cfg.ID = "test-worker"
	}
	w, err := New(cfg, deps)
	if err != nil {
		h.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	tw := &testWorker{Worker: w, ran: make(chan struct{})}
	var runErr error
	go func() {
		defer close(tw.ran)
		runErr = w.Run(ctx)
	}()
	var once sync.Once
	tw.stop = func() {
		once.Do(func() {
			cancel()
			<-tw.ran
			if runErr != nil {
				h.t.Errorf("Run: %v", runErr)
			}
		})
	}
	h.t.Cleanup(tw.stop)
	return tw
}

// connect opens a connection of its own to url (the harness's server if
// empty), closed when the test ends.
func (h *harness) connect(url string) *nats.Conn {
	h.t.Helper()
	if url == "" {
		url = h.srv.ClientURL()
	}
	nc, _, err := natsconn.Connect(natsconn.Config{URL: url}, h.t.Name(), h.logger)
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(nc.Close)
	return nc
}

// userMessages is the conversation of a request with one user message.
func userMessages(content string) []mockupstream.Message {
	return []mockupstream.Message{{Role: "user", Content: content}}
}

// submit queues a request for stream id as an edge does, with a field the
// relay does not know, which must reach the provider untouched.
func (h *harness) submit(id, content string) {
	h.t.Helper()
	h.submitModel(id, "mock-1", content)
}

// submitModel is submit for another model than mock-1.
func (h *harness) submitModel(id, model, content string) {
	h.t.Helper()
	h.submitBody(id, model, map[string]any{
		"model":       model,
		"messages":    userMessages(content),
		"temperature": 0.2,
		"x_custom":    map[string]any{"kept": true},
	})
}

// submitBody queues a request with the client body given.
func (h *harness) submitBody(id, model string, req map[string]any) {
	h.t.Helper()
	body, _ := json.Marshal(req)
	h.submitRequest(wire.Request{StreamID: id, Model: model, Body: body, Created: time.Now().Unix()})
}

// submitRequest queues req as an edge does.
func (h *harness) submitRequest(req wire.Request) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := h.js.Publish(ctx, wire.RequestSubject, req.Encode(), jetstream.WithMsgID(req.StreamID)); err != nil {
		h.t.Fatalf("submit: %v", err)
	}
}

// frames reads a stream's frames.
func (h *harness) frames(id string) []chunklog.Entry {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var out []chunklog.Entry
	if _, err := h.reader.Read(ctx, id, 0, func(e chunklog.Entry) error {
		out = append(out, e)
		return nil
	}); err != nil {
		h.t.Fatalf("read %s: %v", id, err)
	}
	return out
}

// waitEnd waits for the stream's end frame and returns all its frames.
func (h *harness) waitEnd(id string) []chunklog.Entry {
	h.t.Helper()
	var out []chunklog.Entry
	relaytest.Eventually(h.t, waitFor, 5*time.Millisecond, func() bool {
		out = h.frames(id)
		return len(out) > 0 && out[len(out)-1].Frame.Kind == wire.KindEnd
	})
	return out
}

// waitJob waits for a worker's log line about the stream's job and
// returns its status.
func (h *harness) waitJob(id string) string {
	h.t.Helper()
	return h.waitJobOf("", id)
}

// waitJobOf waits for the log line of worker's job of the stream (any
// worker's if worker is empty) and returns its status.
func (h *harness) waitJobOf(worker, id string) string {
	h.t.Helper()
	var status string
	relaytest.Eventually(h.t, waitFor, 5*time.Millisecond, func() bool {
		line, ok := h.logs.find(func(l map[string]string) bool {
			return l["msg"] == "job finished" && l["stream"] == id && (worker == "" || l["worker"] == worker)
		})
		status = line["status"]
		return ok
	})
	return status
}

// waitAcked waits until no request is delivered and unacked, or waiting.
func (h *harness) waitAcked() {
	h.t.Helper()
	relaytest.Eventually(h.t, waitFor, 5*time.Millisecond, func() bool {
		unacked, waiting := h.ackPending()
		return unacked == 0 && waiting == 0
	})
}

// ackPending returns how many requests are delivered and not acked, and how
// many wait for delivery.
func (h *harness) ackPending() (unacked, waiting uint64) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	info, err := h.workerConsumer(ctx).Info(ctx)
	if err != nil {
		h.t.Fatal(err)
	}
	return uint64(info.NumAckPending), info.NumPending
}

// workerConsumer is the consumer the workers pull requests from.
func (h *harness) workerConsumer(ctx context.Context) jetstream.Consumer {
	h.t.Helper()
	cons, err := h.js.Consumer(ctx, wire.RequestStream, wire.WorkerConsumer)
	if err != nil {
		h.t.Fatal(err)
	}
	return cons
}

// appendFrames stores frames as another writer would, after what the
// stream holds.
func (h *harness) appendFrames(id string, frames ...wire.Frame) error {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	hist, err := readHistory(ctx, h.reader, id)
	if err != nil {
		h.t.Fatal(err)
	}
	w := chunklog.NewWriter(h.js, h.reader, id, hist.last, hist.seq)
	for _, f := range frames {
		if _, err := w.Append(ctx, f); err != nil {
			return err
		}
	}
	return nil
}

// chunkText checks that the chunks are numbered 1.N without gaps, that the
// end frame follows as N+1, and returns their text.
func chunkText(t *testing.T, frames []chunklog.Entry) (string, []wire.Frame) {
	t.Helper()
	var text string
	var chunks []wire.Frame
	for _, e := range frames {
		f := e.Frame
		switch f.Kind {
		case wire.KindChunk:
			chunks = append(chunks, f)
			if f.Seq != uint64(len(chunks)) {
				t.Fatalf("chunk %d has seq %d", len(chunks), f.Seq)
			}
			text += f.Content
		case wire.KindEnd:
			if f.Seq != uint64(len(chunks)+1) {
				t.Fatalf("end frame has seq %d after %d chunks", f.Seq, len(chunks))
			}
		}
	}
	return text, chunks
}

// recorder keeps every log record for assertions and passes it on.
type recorder struct {
	inner slog.Handler
	attrs []slog.Attr
	store *logStore
}

type logStore struct {
	mu    sync.Mutex
	lines []map[string]string
}

func (s *logStore) find(match func(map[string]string) bool) (map[string]string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range s.lines {
		if match(l) {
			return l, true
		}
	}
	return nil, false
}

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }

func (r *recorder) Handle(ctx context.Context, rec slog.Record) error {
	line := map[string]string{"msg": rec.Message, "level": rec.Level.String()}
	for _, a := range r.attrs {
		line[a.Key] = a.Value.String()
	}
	rec.Attrs(func(a slog.Attr) bool {
		line[a.Key] = a.Value.String()
		return true
	})
	r.store.mu.Lock()
	r.store.lines = append(r.store.lines, line)
	r.store.mu.Unlock()
	return r.inner.Handle(ctx, rec)
}

func (r *recorder) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &recorder{inner: r.inner.WithAttrs(attrs), attrs: append(slices.Clip(r.attrs), attrs...), store: r.store}
}

func (r *recorder) WithGroup(name string) slog.Handler {
	return &recorder{inner: r.inner.WithGroup(name), attrs: r.attrs, store: r.store}
}

// recordingGate admits every call except those to the providers in
// refuse, and keeps the reports.
type recordingGate struct {
	refuse map[string]bool
	// cause is why the refusals are made (fleet.ErrProviderOpen…); nil:
	// none given.
	cause error

	mu      sync.Mutex
	admits  []string // "provider/model", in order
	reports []fleet.Report
}

func (g *recordingGate) Admit(_ context.Context, provider, model string) (fleet.Ticket, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.admits = append(g.admits, provider+"/"+model)
	if g.refuse[provider] {
		if g.cause != nil {
			return nil, &fleet.UnavailableError{Provider: provider, Model: model, Cause: g.cause}
		}
		return nil, fmt.Errorf("test gate: %w", fleet.ErrProviderUnavailable)
	}
	return gateTicket{g}, nil
}

type gateTicket struct{ g *recordingGate }

func (t gateTicket) Done(r fleet.Report) {
	t.g.mu.Lock()
	defer t.g.mu.Unlock()
	t.g.reports = append(t.g.reports, r)
}

// verdicts returns "provider/model:verdict" for every report, in order.
func (g *recordingGate) verdicts() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []string
	for _, r := range g.reports {
		out = append(out, r.Provider+"/"+r.Model+":"+r.Verdict.String())
	}
	return out
}

// usurp waits until the stream has a chunk, then appends another worker's
// claim to it, fencing the worker that writes it. Appending races with
// that worker's appends; it is retried until the claim is chained on the
// latest frame.
func (h *harness) usurp(id string) {
	h.t.Helper()
	relaytest.Eventually(h.t, waitFor, 5*time.Millisecond, func() bool {
		_, chunks := chunkText(h.t, h.frames(id))
		return len(chunks) > 0
	})
	relaytest.Eventually(h.t, waitFor, time.Millisecond, func() bool {
		err := h.appendFrames(id, wire.Frame{Kind: wire.KindClaim, Worker: "usurper"})
		if err != nil && !errors.Is(err, chunklog.ErrFenced) {
			h.t.Fatal(err)
		}
		return err == nil
	})
}
