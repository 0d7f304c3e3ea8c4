package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/e2e/procs"
	"github.com/relaydev/relay/relay/wire"
)

// The public Durable Streams conformance suite against a replicated
// deployment while it is hurt: three nats-servers (every stream on three
// replicas), two edges behind a front (edgeFront), two workers and the
// coordinator, each a process of its own. Once a quarter of the suite has
// passed, a worker is SIGKILLed and started again, and an edge is taken
// down as operators take one down, SIGTERM (it drains and exits), and
// started again; once half has passed, the nats-server leading the chunk
// stream is SIGKILLed and started again. Every test of the suite passes,
// and the drained edge exits cleanly.
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
	{0.5, "chunk leader SIGKILL", (*dsFaults).killChunkLeader},
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
// exit cleanly, and starts it again behind the front.
func (f *dsFaults) drainEdge(ctx context.Context) error {
	e := f.s.edgeProcs[0]
	if err := e.Term(); err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := e.Wait(wctx); err != nil {
		return fmt.Errorf("the drained edge: %w", err)
	}
	next, err := f.s.procs.Restart(ctx, e)
	if err != nil {
		return err
	}
	f.s.edgeProcs[0], f.s.Edges[0] = next, next.URL
	f.front.setEdge(0, next.URL)
	return nil
}

// killChunkLeader SIGKILLs the nats-server that leads the chunk stream
// and starts it again with its store.
func (f *dsFaults) killChunkLeader(ctx context.Context) error {
	js, err := jetstream.New(f.s.nc)
	if err != nil {
		return err
	}
	ictx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	st, err := js.Stream(ictx, wire.ChunkStream)
	if err != nil {
		return err
	}
	info := st.CachedInfo()
	if info.Cluster == nil || info.Cluster.Leader == "" {
		return fmt.Errorf("%s has no leader", wire.ChunkStream)
	}
	for _, n := range f.s.natsProcs {
		if n.Name != info.Cluster.Leader {
			continue
		}
		if err := n.Kill(); err != nil {
			return err
		}
		next, err := f.s.procs.Restart(ctx, n.Process)
		if err != nil {
			return err
		}
		n.Process = next
		return nil
	}
	return fmt.Errorf("no nats-server named %q", info.Cluster.Leader)
}
