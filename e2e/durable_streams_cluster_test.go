package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relaydev/relay/e2e/procs"
)

// The public Durable Streams conformance suite against a replicated
// deployment while it is hurt: three nats-servers (every stream on three
// replicas), two edges behind a front (edgeFront), two workers and the
// coordinator, each a process of its own. Once a quarter of the suite has
// passed, a worker is SIGKILLed and started again, and an edge is taken
// down as operators take one down, SIGTERM (it drains and exits), and
// started again. Every test of the suite passes; the drained edge ends a
// live=sse read and a long-poll of its own cleanly and exits with status
// 0. (A SIGKILL of the chunk stream's leader is not among the faults: the
// election takes about 4 s, during which the stream's reads and appends
// wait, and the suite's test then in flight outlives its 5 s.)
func TestDurableStreamsSuiteOnAClusterWithKills(t *testing.T) {
	s := start(t, options{Processes: true, ClusterNodes: 3, Edges: 2, Workers: 2, Coordinator: true,
		// As TestDurableStreamsConformance runs the edge.
		EdgeSettings: procs.Settings{
			"edge.durable_streams.long_poll_timeout": dsLongPoll.String(),
			"edge.cors_allowed_origins":              []string{"*"},
		},
	})
	front := startEdgeFront(t, s.Edges...)
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	base := front.URL + "/ds"
	total := dsSuiteTotal(t, ctx, base)

	f := &dsFaults{t: t, s: s, front: front, started: time.Now(), passed: make(chan int, 1)}
	var wg sync.WaitGroup
	wg.Go(func() { f.run(ctx, total) })
	res := runDSSuite(t, ctx, base, func(n int) {
		select { // the fault loop needs only the latest count
		case <-f.passed:
		default:
		}
		f.passed <- n
	})
	close(f.passed)
	wg.Wait()
	elapsed := time.Since(f.started)

	t.Logf("suite: %d passed, %d failed, %d skipped by the suite, in %v; faults: %s; the front sent %v to the other edge",
		res.Passed, res.Failed, res.Skipped, elapsed.Round(time.Millisecond), strings.Join(f.log, "; "), front.retries())
	for _, fail := range res.Failures {
		t.Errorf("failed: %s", fail)
	}
	if t.Failed() {
		t.Logf("suite output:\n%s", res.Output)
	}
	if res.Passed != total || res.Failed > 0 {
		t.Fatalf("%d of %d tests passed", res.Passed, total)
	}
	if len(f.log) != len(dsFaultSteps) {
		t.Fatalf("%d of %d faults happened before the suite ended: %v", len(f.log), len(dsFaultSteps), f.log)
	}
	expectRunning(t, append(append([]*procs.Process{s.coordProc}, s.workerProcs...), s.edgeProcs...)...)
}

// dsFaultSteps are the faults, each once the given share of the suite
// has passed.
var dsFaultSteps = []struct {
	share float64
	what  string
	do    func(*dsFaults, context.Context) error
}{
	{0.25, "worker SIGKILL", (*dsFaults).killWorker},
	{0.25, "edge SIGTERM", (*dsFaults).drainEdge},
}

// dsFaults delivers the faults while the suite runs.
type dsFaults struct {
	t       *testing.T
	s       *system
	front   *edgeFront
	started time.Time
	// passed carries the count of passed tests; closed when the suite
	// ended.
	passed chan int
	// log says what was done when; read once run returned.
	log []string
}

// run delivers each step once enough of the suite has passed, one at a
// time, until the steps or the suite end.
func (f *dsFaults) run(ctx context.Context, total int) {
	n := 0
	for _, step := range dsFaultSteps {
		for float64(n) < step.share*float64(total) {
			var ok bool
			if n, ok = <-f.passed; !ok {
				return
			}
		}
		at := time.Since(f.started)
		if err := step.do(f, ctx); err != nil {
			f.t.Errorf("%s at %d passed: %v", step.what, n, err)
			return
		}
		f.log = append(f.log, fmt.Sprintf("%s at %v (%d passed, back after %v)", step.what,
			at.Round(time.Millisecond), n, (time.Since(f.started)-at).Round(time.Millisecond)))
	}
}

// killWorker SIGKILLs the first worker and starts it again.
func (f *dsFaults) killWorker(ctx context.Context) error {
	w := f.s.workerProcs[0]
	if err := w.Kill(); err != nil {
		return err
	}
	next, err := f.s.procs.Restart(ctx, w)
	if err != nil {
		return err
	}
	f.s.workerProcs[0] = next
	return nil
}

// drainEdge sends SIGTERM to the first edge, waits for it to drain and
// exit cleanly, and starts it again behind the front. Before the signal it
// opens a live=sse read and a long-poll of a stream of its own on that
// edge: the drain ends the SSE response with a control event at the
// stream's tail, and answers the long-poll, before the edge exits.
func (f *dsFaults) drainEdge(ctx context.Context) error {
	e := f.s.edgeProcs[0]
	live, err := openLiveReads(ctx, e.URL+"/ds/drain-check")
	if err != nil {
		return err
	}
	if err := e.Term(); err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := e.Wait(wctx); err != nil {
		return fmt.Errorf("the drained edge: %w", err)
	}
	if err := live.check(); err != nil {
		return err
	}
	next, err := f.s.procs.Restart(ctx, e)
	if err != nil {
		return err
	}
	f.s.edgeProcs[0], f.s.Edges[0] = next, next.URL
	f.front.setEdge(0, next.URL)
	return nil
}

// liveReads are a live=sse response open on one edge, at a stream's
// tail, and a long-poll there.
type liveReads struct {
	tail   string
	sse    *http.Response
	events *bufio.Reader
	polled chan error
}

// openLiveReads creates the stream at url and opens both reads of it.
func openLiveReads(ctx context.Context, url string) (*liveReads, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, url, strings.NewReader("data"))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "text/plain")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	res.Body.Close()
	l := &liveReads{tail: res.Header.Get("Stream-Next-Offset"), polled: make(chan error, 1)}
	if res.StatusCode != http.StatusCreated || l.tail == "" {
		return nil, fmt.Errorf("PUT %s: %s, offset %q", url, res.Status, l.tail)
	}
	go func() {
		res, err := http.Get(url + "?offset=" + l.tail + "&live=long-poll")
		if err == nil {
			res.Body.Close()
			if res.StatusCode != http.StatusNoContent {
				err = fmt.Errorf("the long-poll was answered %s, want 204", res.Status)
			}
		}
		l.polled <- err
	}()
	if l.sse, err = http.Get(url + "?offset=" + l.tail + "&live=sse"); err != nil {
		return nil, err
	}
	l.events = bufio.NewReader(l.sse.Body)
	if l.sse.StatusCode != http.StatusOK {
		l.sse.Body.Close()
		return nil, fmt.Errorf("live=sse: %s", l.sse.Status)
	}
	if _, err := lastControl(l.events, false); err != nil { // the one that says it is at the tail
		return nil, err
	}
	return l, nil
}

// check reads what the drained edge sent the reads.
func (l *liveReads) check() error {
	defer l.sse.Body.Close()
	last, err := lastControl(l.events, true)
	if err != nil {
		return fmt.Errorf("the SSE response across the drain: %w", err)
	}
	if last.NextOffset != l.tail || !last.UpToDate || last.Closed {
		return fmt.Errorf("the SSE response ended with control %+v, want the tail %s, up to date", last, l.tail)
	}
	return <-l.polled
}

// dsControl is a Durable Streams SSE control event.
type dsControl struct {
	NextOffset string `json:"streamNextOffset"`
	UpToDate   bool   `json:"upToDate"`
	Closed     bool   `json:"streamClosed"`
}

// lastControl returns the next control event or, with toEnd, the last
// one before the response ended.
func lastControl(r *bufio.Reader, toEnd bool) (dsControl, error) {
	var last dsControl
	seen := false
	event := ""
	for {
		line, err := r.ReadString('\n')
		if err == io.EOF && toEnd && seen {
			return last, nil
		}
		if err != nil {
			return last, err
		}
		line = strings.TrimRight(line, "\r\n")
		switch {
		case strings.HasPrefix(line, "event:"):
			event = strings.TrimSpace(line[len("event:"):])
		case strings.HasPrefix(line, "data:") && event == "control":
			if err := json.Unmarshal([]byte(strings.TrimSpace(line[len("data:"):])), &last); err != nil {
				return last, fmt.Errorf("control event %q: %w", line, err)
			}
			if seen = true; !toEnd {
				return last, nil
			}
		}
	}
}
