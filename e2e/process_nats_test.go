package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/e2e/procs"
	"github.com/relaydev/relay/relay/mockupstream"
	"github.com/relaydev/relay/relay/wire"
)

// streamAll starts n streams, alternating over edges, and reads a few
// events of each. A POST the edge refuses with 503 (NATS or a stream's
// leader unavailable: nothing was queued) is retried, as clients and SDKs
// do; refused reports how long until the edge accepted the first.
func streamAll(t *testing.T, ctx context.Context, s *system, n, tokens int, topic string) (clients []*pclient, refused time.Duration) {
	t.Helper()
	for i := range n {
		msgs, want := prompt(fmt.Sprintf("Process test: %s, stream %d.", topic, i), tokens)
		first := time.Now()
		var c *pclient
		for {
			var err error
			c, err = postStream(ctx, s.edgeProcs[i%len(s.edgeProcs)].URL, msgs, want, nil)
			var he *httpError
			if errors.As(err, &he) && he.Status == http.StatusServiceUnavailable && ctx.Err() == nil {
				time.Sleep(100 * time.Millisecond)
				continue
			}
			must(t, err)
			break
		}
		if i == 0 {
			refused = time.Since(first)
		}
		t.Cleanup(c.close)
		clients = append(clients, c)
	}
	for _, c := range clients {
		must(t, c.readN(5))
	}
	return clients, refused
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
	clients, _ := streamAll(t, ctx, s, streams, tokens, "NATS restarts")

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
	after, _ := streamAll(t, ctx, s, 1, tokens, "after the restart")
	finishAll(t, ctx, s, after)
	if worst > 20*time.Second {
		t.Errorf("a stream was silent for %v", worst)
	}
}

// On a three-node JetStream cluster with every stream and bucket replicated
// three times, the node leading RELAY_CHUNKS is SIGKILLed mid-run. No chunk
// is lost, every stream completes (after a raft election of several
// seconds), and new requests work on the two remaining nodes.
func TestProcessNATSClusterNodeLoss(t *testing.T) {
	const tokens, streams = 100, 6
	s := start(t, options{Processes: true,
		ClusterNodes: 3, Mock: mockupstream.Config{Tokens: tokens, TokenInterval: 40 * time.Millisecond},
		Edges: 2, Workers: 2, Coordinator: true,
		Streams: procs.Settings{"streams.replicas": 3},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	js, err := jetstream.New(s.nc)
	must(t, err)
	leader := func() (string, int) {
		infoCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		st, err := js.Stream(infoCtx, wire.ChunkStream)
		if err != nil {
			return "", 0
		}
		info := st.CachedInfo()
		if info.Cluster == nil {
			return "", info.Config.Replicas
		}
		return info.Cluster.Leader, info.Config.Replicas
	}
	name, replicas := leader()
	if replicas != 3 || name == "" {
		t.Fatalf("%s: leader %q, %d replicas; want a leader and 3 replicas", wire.ChunkStream, name, replicas)
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

	clients, _ := streamAll(t, ctx, s, streams, tokens, "a cluster node dies")
	killed := time.Now()
	must(t, victim.Kill())
	t.Logf("SIGKILLed %s, the leader of %s", name, wire.ChunkStream)
	finishAll(t, ctx, s, clients)
	report, _ := faultReport(clients, killed)
	next, _ := leader()
	t.Logf("node loss: new leader %s; longest silence per stream: %s", next, report)
	if next == "" || next == name {
		t.Errorf("leader after the loss: %q", next)
	}
	expectRunning(t, append(append([]*procs.Process{s.coordProc}, s.workerProcs...), s.edgeProcs...)...)

	// New requests: the edge refuses them (503) until every group it
	// writes to (the metadata bucket, the work queue) has a leader again.
	sent := time.Since(killed)
	after, refused := streamAll(t, ctx, s, 2, tokens, "after the node loss")
	t.Logf("node loss: the first new request, sent %v after the kill, was accepted after %v",
		sent.Round(time.Millisecond), refused.Round(time.Millisecond))
	finishAll(t, ctx, s, after)
}
