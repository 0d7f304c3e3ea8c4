package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/relaydev/relay/e2e/procs"
	"github.com/relaydev/relay/relay/mockupstream"
	"github.com/relaydev/relay/relay/wire"
)

// The process tests (TestProcess...) run every role as its own operating
// system process (package procs) and deliver faults for real: SIGKILL,
// SIGSTOP/SIGCONT, SIGTERM, a nats-server killed and restarted, a cluster
// node lost. They observe the system from outside only: HTTP and
// WebSocket clients, the processes' JSON logs, and a NATS connection of
// their own that listens to the republished frames (relay.live.>) and to
// the work queue's acknowledgements.

// processBuild holds the binaries, built once per test binary.
var processBuild struct {
	once sync.Once
	dir  string
	bin  procs.Binaries
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if processBuild.dir != "" {
		os.RemoveAll(processBuild.dir)
	}
	os.Exit(code)
}

// processBinaries builds the relay and nats-server once for every process
// test.
func processBinaries(t *testing.T) procs.Binaries {
	t.Helper()
	processBuild.once.Do(func() {
		dir, err := os.MkdirTemp("", "relay-process-tests-")
		if err != nil {
			processBuild.err = err
			return
		}
		processBuild.dir = dir
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		start := time.Now()
		processBuild.bin, processBuild.err = procs.Build(ctx, "", dir)
		t.Logf("built relay and nats-server in %v", time.Since(start).Round(time.Millisecond))
	})
	if processBuild.err != nil {
		t.Fatal(processBuild.err)
	}
	return processBuild.bin
}

// processSystem is what options.Processes adds to a system.
type processSystem struct {
	procs       *procs.Harness
	natsProcs   []*procs.NATS
	mockProc    *procs.Process
	proxy       *upstreamProxy
	providers   []procs.Provider
	edgeProcs   []*procs.Process
	workerProcs []*procs.Process
	coordProc   *procs.Process
	// nc is the test's own connection; frames records what it heard on
	// relay.live.>.
	nc     *nats.Conn
	frames *frameLog
}

// startProcesses starts the system's processes; they stop when the test
// ends. On failure the tail of every process's log goes to the test log.
func (s *system) startProcesses() {
	t, o := s.t, s.o
	t.Helper()
	bin := processBinaries(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	h, err := procs.New(ctx, procs.Options{Dir: t.TempDir(), Binaries: bin, Logf: t.Logf, StopTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	s.procs, s.frames = h, newFrameLog()
	t.Cleanup(func() {
		if s.nc != nil {
			s.nc.Close()
		}
		if s.proxy != nil {
			s.proxy.close()
		}
		if t.Failed() {
			s.dumpLogs(40)
		}
		if err := h.Close(); err != nil {
			t.Logf("closing the processes: %v", err)
		}
	})

	if o.ClusterNodes > 0 {
		s.natsProcs, err = h.StartNATSCluster(ctx, o.ClusterNodes, procs.NATSOptions{})
	} else {
		var n *procs.NATS
		n, err = h.StartNATS(ctx, procs.NATSOptions{})
		s.natsProcs = []*procs.NATS{n}
	}
	if err != nil {
		t.Fatal(err)
	}
	w := o.Mock.Weather
	mock := procs.Settings{
		"log.format":                         "json",
		"mock_upstream.tokens":               o.Mock.Tokens,
		"mock_upstream.token_interval":       o.Mock.TokenInterval.String(),
		"mock_upstream.weather.cut":          w.Cut,
		"mock_upstream.weather.stall":        w.Stall,
		"mock_upstream.weather.stall_for":    w.StallFor.String(),
		"mock_upstream.weather.rate_limited": w.RateLimited,
		"mock_upstream.weather.retry_after":  w.RetryAfter.String(),
	}
	if o.Mock.ContextWindows != nil {
		mock["mock_upstream.context_windows"] = o.Mock.ContextWindows
	}
	if o.Mock.CommentInterval > 0 {
		mock["mock_upstream.comment_interval"] = o.Mock.CommentInterval.String()
	}
	if o.Mock.NoPrefill != nil {
		mock["mock_upstream.no_prefill"] = o.Mock.NoPrefill
	}
	s.mockProc, err = h.Start(ctx, procs.Role{Role: procs.MockUpstream, Settings: mock})
	if err != nil {
		t.Fatal(err)
	}
	provider := s.mockProc.Provider("mock", "mock-1", "mock-2")
	provider.Type = o.ProviderType
	if o.Proxy {
		s.proxy = newUpstreamProxy(t, s.mockProc.Addr)
		provider.BaseURL = "http://" + s.proxy.addr() + "/v1"
	}
	s.providers = []procs.Provider{provider}
	if o.ProvidersOf != nil {
		s.providers = o.ProvidersOf(provider)
	}

	s.listenToFrames()
	if o.Coordinator {
		s.coordProc = s.startRole(ctx, procs.Coordinator, nil)
	}
	for range o.Workers {
		s.workerProcs = append(s.workerProcs, s.startWorker(ctx, nil))
	}
	for range o.Edges {
		e := s.startRole(ctx, procs.Edge, o.EdgeSettings)
		s.edgeProcs = append(s.edgeProcs, e)
		s.Edges = append(s.Edges, e.URL)
	}
	s.Edge = s.Edges[0]
}

// startRole starts one role with the system's NATS, providers and stream
// settings, JSON logs, and extra on top.
func (s *system) startRole(ctx context.Context, role string, extra procs.Settings) *procs.Process {
	s.t.Helper()
	settings := merged(procs.Settings{"log.format": "json"}, s.o.Settings, extra)
	p, err := s.procs.Start(ctx, procs.Role{Role: role, NATS: procs.URLs(s.natsProcs...), Providers: s.providers, Settings: settings})
	if err != nil {
		s.t.Fatal(err)
	}
	return p
}

// startWorker starts a worker with a short drain_timeout (so that Close
// does not wait for the 10 s default), the system's worker settings and
// extra on top.
func (s *system) startWorker(ctx context.Context, extra procs.Settings) *procs.Process {
	s.t.Helper()
	settings := merged(procs.Settings{"worker.drain_timeout": "2s"}, s.o.WorkerSettings, extra)
	return s.startRole(ctx, procs.Worker, settings)
}

// merged is the settings of every layer, later layers over earlier ones.
func merged(layers ...procs.Settings) procs.Settings {
	out := procs.Settings{}
	for _, l := range layers {
		maps.Copy(out, l)
	}
	return out
}

// listenToFrames opens the test's own NATS connection and records every
// frame republished on relay.live.>.
func (s *system) listenToFrames() {
	s.t.Helper()
	nc, err := nats.Connect(strings.Join(procs.URLs(s.natsProcs...), ","), nats.Name("process-test"),
		nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		s.t.Fatal(err)
	}
	s.nc = nc
	if _, err := nc.Subscribe("relay.live.>", s.frames.record); err != nil {
		s.t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		s.t.Fatal(err)
	}
}

// worker returns the worker process named name (the latest start of it).
func (s *system) worker(name string) *procs.Process {
	s.t.Helper()
	for i := len(s.workerProcs) - 1; i >= 0; i-- {
		if s.workerProcs[i].Name == name {
			return s.workerProcs[i]
		}
	}
	s.t.Fatalf("no worker %q", name)
	return nil
}

// mockStats reads the fake upstream's counters.
func (s *system) mockStats() mockupstream.Stats {
	s.t.Helper()
	resp, err := http.Get(s.mockURL() + "/mock/stats")
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	var st mockupstream.Stats
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		s.t.Fatal(err)
	}
	return st
}

// dumpLogs writes the last n lines of every process's log to the test log.
func (s *system) dumpLogs(n int) {
	for _, p := range s.procs.Processes() {
		log, err := p.Log()
		if err != nil {
			continue
		}
		lines := strings.Split(strings.TrimRight(log, "\n"), "\n")
		if len(lines) > n {
			lines = lines[len(lines)-n:]
		}
		s.t.Logf("--- %s (%s), last %d lines:\n%s", p.Name, p.LogPath, len(lines), strings.Join(lines, "\n"))
	}
}

// frameSeen is one frame heard on relay.live.<id>.
type frameSeen struct {
	At    time.Time
	JSSeq string
	Frame wire.Frame
}

// frameLog records the frames the test's connection heard, per stream.
// Core NATS: a frame published while the test's connection reconnects is
// missed, so tests that restart NATS read the stored log instead.
type frameLog struct {
	mu     sync.Mutex
	frames map[string][]frameSeen
}

func newFrameLog() *frameLog { return &frameLog{frames: map[string][]frameSeen{}} }

func (l *frameLog) record(m *nats.Msg) {
	id := strings.TrimPrefix(m.Subject, "relay.live.")
	var f wire.Frame
	if err := json.Unmarshal(m.Data, &f); err != nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.frames[id] = append(l.frames[id], frameSeen{At: time.Now(), JSSeq: m.Header.Get(wire.HeaderSequence), Frame: f})
}

// of returns the frames of stream id heard so far.
func (l *frameLog) of(id string) []frameSeen {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]frameSeen(nil), l.frames[id]...)
}

// claims returns the claim frames of stream id heard so far.
func (l *frameLog) claims(id string) []frameSeen {
	var out []frameSeen
	for _, f := range l.of(id) {
		if f.Frame.Kind == wire.KindClaim {
			out = append(out, f)
		}
	}
	return out
}

// end returns the end frame of stream id, if it was heard.
func (l *frameLog) end(id string) (frameSeen, bool) {
	for _, f := range l.of(id) {
		if f.Frame.Kind == wire.KindEnd {
			return f, true
		}
	}
	return frameSeen{}, false
}

// open returns the streams heard that have not ended.
func (l *frameLog) open() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var ids []string
	for id, frames := range l.frames {
		if frames[len(frames)-1].Frame.Kind != wire.KindEnd {
			ids = append(ids, id)
		}
	}
	return ids
}

// held counts the streams whose latest claim is worker's and that have
// not ended, as far as the frames heard tell.
func (l *frameLog) held(worker string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, frames := range l.frames {
		owner := ""
		for _, f := range frames {
			switch f.Frame.Kind {
			case wire.KindClaim:
				owner = f.Frame.Worker
			case wire.KindEnd:
				owner = ""
			}
		}
		if owner == worker {
			n++
		}
	}
	return n
}

// waitFor polls cond every 20 ms until it holds or wait has passed.
func waitFor(t *testing.T, wait time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, wait)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// owner waits until stream id has been claimed n times and returns the
// worker of the nth claim.
func (s *system) owner(id string, n int, wait time.Duration) frameSeen {
	s.t.Helper()
	var c []frameSeen
	waitFor(s.t, wait, fmt.Sprintf("claim %d of stream %s", n, id), func() bool {
		c = s.frames.claims(id)
		return len(c) >= n
	})
	return c[n-1]
}

// logEntry is one JSON line of a process's log.
type logEntry map[string]any

func (e logEntry) str(key string) string {
	v, _ := e[key].(string)
	return v
}

// logEntries parses the JSON lines of p's log (stdout lines, prefixed
// "stdout: ", and anything else that is not JSON are skipped).
func logEntries(p *procs.Process) []logEntry {
	f, err := os.Open(p.LogPath)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []logEntry
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 || line[0] != '{' {
			continue
		}
		var e logEntry
		if json.Unmarshal(line, &e) == nil {
			out = append(out, e)
		}
	}
	return out
}

// logged returns p's log entries with message msg (and, if stream is not
// empty, that stream).
func logged(p *procs.Process, msg, stream string) []logEntry {
	var out []logEntry
	for _, e := range logEntries(p) {
		if e.str("msg") == msg && (stream == "" || e.str("stream") == stream) {
			out = append(out, e)
		}
	}
	return out
}

// jobStatuses returns the statuses of p's "job finished" lines for stream
// (every stream if empty).
func jobStatuses(p *procs.Process, stream string) []string {
	var out []string
	for _, e := range logged(p, "job finished", stream) {
		out = append(out, e.str("status"))
	}
	return out
}

// expectJobStatuses waits (up to 5 s: a job logs its end after the ack
// that follows its end frame) until p's "job finished" lines for stream
// are want.
func expectJobStatuses(t *testing.T, p *procs.Process, stream string, want ...string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := jobStatuses(p, stream)
		if slices.Equal(got, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("%s's jobs for stream %s ended %v; want %v", p.Name, stream, got, want)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// countJobStatus counts status among the "job finished" lines of ps.
func countJobStatus(ps []*procs.Process, status string) int {
	n := 0
	for _, p := range ps {
		for _, st := range jobStatuses(p, "") {
			if st == status {
				n++
			}
		}
	}
	return n
}

// countLogged counts the lines with message msg in the logs of ps.
func countLogged(ps []*procs.Process, msg string) int {
	n := 0
	for _, p := range ps {
		n += len(logged(p, msg, ""))
	}
	return n
}
