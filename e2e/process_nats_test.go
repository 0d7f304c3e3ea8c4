package e2e

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/e2e/procs"
	"github.com/relaydev/relay/relay/mockupstream"
	"github.com/relaydev/relay/relay/relaytest"
	"github.com/relaydev/relay/relay/wire"
)

// streamAll starts n streams, alternating over edges, and reads a few
// events of each. None may be refused: an edge waits for NATS, and for a
// stream's leader, rather than answer 503 (edge/start_submit_wait.go).
func streamAll(t *testing.T, ctx context.Context, s *system, n, tokens int, topic string) []*pclient {
	t.Helper()
	var clients []*pclient
	for i := range n {
		msgs, want := prompt(fmt.Sprintf("Process test: %s, stream %d.", topic, i), tokens)
		c, err := postStream(ctx, s.edgeProcs[i%len(s.edgeProcs)].URL, msgs, want, nil)
		must(t, err)
		t.Cleanup(c.close)
		clients = append(clients, c)
	}
	for _, c := range clients {
		must(t, c.readN(5))
	}
	return clients
}

// finishAll reads every stream to its end, each resuming on the edges in
// turn when its connection breaks, and checks every transcript.
func finishAll(t *testing.T, ctx context.Context, s *system, clients []*pclient) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make([]error, len(clients))
	for i, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			turn := i
			pick := func() string { turn++; return s.edgeProcs[turn%len(s.edgeProcs)].URL }
			if errs[i] = c.finish(ctx, pick, nil); errs[i] == nil {
				errs[i] = c.check()
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
}

// faultReport summarizes, per stream, the silence after a fault and the
// resumes it took.
func faultReport(clients []*pclient, fault time.Time) (string, time.Duration) {
	var parts []string
	var worst time.Duration
	for _, c := range clients {
		gap := c.maxGap(fault)
		worst = max(worst, gap)
		part := gap.Round(time.Millisecond).String()
		if c.resumes > 0 {
			part += fmt.Sprintf(" (%d resumes after %v)", c.resumes, c.broken)
		}
		parts = append(parts, part)
	}
	return strings.Join(parts, ", "), worst
}

// expectRunning fails if a role process has exited.
func expectRunning(t *testing.T, ps ...*procs.Process) {
	t.Helper()
	for _, p := range ps {
		select {
		case <-p.Exited():
			t.Errorf("%s exited: %v", p.Name, p.Wait(context.Background()))
		default:
		}
	}
}

// The nats-server (file storage) is SIGKILLed mid-answer and started again
// on the same port with the same store. Every role reconnects on its own
// and every stream completes exactly; a new request works afterwards.
func TestProcessNATSRestart(t *testing.T) {
	const tokens, streams = 100, 4
	s := start(t, options{Processes: true, Mock: mockupstream.Config{Tokens: tokens, TokenInterval: 40 * time.Millisecond}, Edges: 1, Workers: 2, Coordinator: true})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	clients := streamAll(t, ctx, s, streams, tokens, "NATS restarts")

	node := s.natsProcs[0]
	killed := time.Now()
	must(t, node.Kill())
	// Down for a while, as a restart by a supervisor would be; the
	// workers keep streaming the upstream's tokens into memory.
	time.Sleep(time.Second)
	p, err := s.procs.Restart(ctx, node.Process)
	must(t, err)
	node.Process = p
	down := time.Since(killed)

	finishAll(t, ctx, s, clients)
	report, worst := faultReport(clients, killed)
	t.Logf("nats-server down %v (SIGKILL to healthy again); longest silence per stream: %s", down.Round(time.Millisecond), report)

	roles := append(append([]*procs.Process{s.coordProc}, s.workerProcs...), s.edgeProcs...)
	expectRunning(t, roles...)
	for _, r := range roles {
		if len(logged(r, "nats reconnected", "")) == 0 {
			t.Errorf("%s did not log a reconnection", r.Name)
		}
	}
	// A new request goes the whole way.
	after := streamAll(t, ctx, s, 1, tokens, "after the restart")
	finishAll(t, ctx, s, after)
	if worst > 20*time.Second {
		t.Errorf("a stream was silent for %v", worst)
	}
}

// On a three-node JetStream cluster with every stream and bucket replicated
// three times, the node leading every chunk stream is SIGKILLed mid-run. No chunk
// is lost, every stream completes (after a raft election of several
// seconds), and new requests work on the two remaining nodes.
func TestProcessNATSClusterNodeLoss(t *testing.T) {
	// Streams enough, at a pace quick enough, that the workers append
	// them in atomic batches when the leader dies.
	// (A token every 10 ms: a worker's appends are spread over the three
	// partitions' lanes, each of which must get them often enough to
	// batch them.)
	const tokens, streams = 200, 24
	s := start(t, options{Processes: true,
		ClusterNodes: 3, Mock: mockupstream.Config{Tokens: tokens, TokenInterval: 10 * time.Millisecond},
		// streams.replicas unset: three on a cluster, as shipped.
		Edges: 2, Workers: 2, Coordinator: true,
	})
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	js, err := jetstream.New(s.nc)
	must(t, err)
	leaderOf := func(stream string) (string, int) {
		infoCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		st, err := js.Stream(infoCtx, stream)
		if err != nil {
			return "", 0
		}
		info := st.CachedInfo()
		if info.Cluster == nil {
			return "", info.Config.Replicas
		}
		return info.Cluster.Leader, info.Config.Replicas
	}
	leader := func() (string, int) { return leaderOf(wire.ChunkStream) }
	name, replicas := leader()
	if replicas != 3 || name == "" {
		t.Fatalf("%s: leader %q, %d replicas; want a leader and 3 replicas", wire.ChunkStream, name, replicas)
	}
	// The other partitions' chunk streams, and the groups a new request
	// is written to, are led by the same node, so that every stream and
	// the requests sent during the election below meet it, and so is the
	// usage ledger, which the streams ending after the kill write to.
	for _, stream := range []string{wire.ChunkStreamName(1), wire.ChunkStreamName(2), wire.RequestStream, "KV_" + wire.MetaBucket, "KV_" + wire.IdempotencyBucket, "KV_" + wire.UsageBucket} {
		if l, _ := leaderOf(stream); l != name {
			_, err := s.nc.Request("$JS.API.STREAM.LEADER.STEPDOWN."+stream, []byte(`{"placement":{"preferred":"`+name+`"}}`), 5*time.Second)
			must(t, err)
		}
		relaytest.Eventually(t, 20*time.Second, 20*time.Millisecond, func() bool { l, _ := leaderOf(stream); return l == name })
	}
	var victim *procs.NATS
	for _, n := range s.natsProcs {
		if n.Name == name {
			victim = n
		}
	}
	if victim == nil {
		t.Fatalf("no node named %q", name)
	}

	clients := streamAll(t, ctx, s, streams, tokens, "a cluster node dies")
	killed := time.Now()
	must(t, victim.Kill())
	t.Logf("SIGKILLed %s, the leader of every chunk stream", name)
	// New requests sent during the election are accepted, not refused:
	// the edge waits for the groups it writes to to have a leader again,
	// where a 503 would fail a client whose SDK gives up after two
	// retries, before the election ends. The first carries an idempotency
	// key, which is recorded in a bucket of its own first.
	var during []*pclient
	for i := range 2 {
		msgs, want := prompt(fmt.Sprintf("Process test: during the election, stream %d.", i), tokens)
		var header http.Header
		if i == 0 {
			header = http.Header{"Idempotency-Key": {"during-the-election"}}
		}
		sent := time.Now()
		c, err := postStream(ctx, s.edgeProcs[i%len(s.edgeProcs)].URL, msgs, want, header)
		if err != nil {
			t.Fatalf("a request sent %v after the kill: %v", sent.Sub(killed).Round(time.Millisecond), err)
		}
		t.Cleanup(c.close)
		t.Logf("node loss: a request sent %v after the kill had its response headers %v later",
			sent.Sub(killed).Round(time.Millisecond), time.Since(sent).Round(time.Millisecond))
		during = append(during, c)
	}
	finishAll(t, ctx, s, append(clients, during...))
	// Every stream's usage is recorded, those that ended during the
	// election included: a worker waits for the ledger's leader before it
	// acks the request, after which no job of it would record the usage.
	usage, err := js.KeyValue(ctx, wire.UsageBucket)
	must(t, err)
	relaytest.Eventually(t, 40*time.Second, 100*time.Millisecond, func() bool {
		keys, err := usage.Keys(ctx)
		if err != nil {
			return false
		}
		for _, c := range append(clients, during...) {
			if !slices.ContainsFunc(keys, func(k string) bool { return strings.HasSuffix(k, "."+c.id) }) {
				return false
			}
		}
		return true
	})
	report, _ := faultReport(clients, killed)
	// A stream's info may find the group between leaders (a read that
	// timed out, a leader stepping down): the new leader is waited for.
	var next string
	relaytest.Eventually(t, 20*time.Second, 50*time.Millisecond, func() bool {
		next, _ = leader()
		return next != "" && next != name
	})
	t.Logf("node loss: new leader %s; longest silence per stream: %s", next, report)
	// The streams' frames went in the workers' atomic batches up to the
	// kill: on R3 that is how a worker appends.
	expectBatched(t, ctx, s, clients, killed)
	for _, w := range s.workerProcs {
		if started := logged(w, "worker started", ""); len(started) != 1 || started[0]["group_commit"] != true {
			t.Errorf("%s: started %v; want one start with group_commit", w.Name, started)
		}
	}
	expectRunning(t, append(append([]*procs.Process{s.coordProc}, s.workerProcs...), s.edgeProcs...)...)
}
