package e2e

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/relaydev/relay/e2e/procs"
	"github.com/relaydev/relay/relay/chunklog"
	"github.com/relaydev/relay/relay/mockupstream"
	"github.com/relaydev/relay/relay/relaytest"
	"github.com/relaydev/relay/relay/wire"
)

// A worker process SIGKILLed mid-answer. Another worker takes the request
// over (the liveness handover), continues the answer with a second provider
// call, and the client receives the exact text, each cursor once.
func TestProcessWorkerKilledMidAnswer(t *testing.T) {
	const tokens = 80
	s := start(t, options{Processes: true, Mock: mockupstream.Config{Tokens: tokens, TokenInterval: 40 * time.Millisecond}, Edges: 1, Workers: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	msgs, want := prompt("Process test: the worker is killed mid-answer.", tokens)
	c, err := postStream(ctx, s.edgeProcs[0].URL, msgs, want, nil)
	must(t, err)
	defer c.close()
	must(t, c.readN(10))
	owner := s.owner(c.id, 1, 5*time.Second).Frame.Worker
	victim := s.worker(owner)
	lastBefore := c.at[len(c.at)-1]
	killed := time.Now()
	must(t, victim.Kill())
	t.Logf("SIGKILLed %s after %d events", owner, c.tr.events)

	must(t, c.finish(ctx, func() string { return s.edgeProcs[0].URL }, nil))
	must(t, c.check())
	next, ok := c.firstAfter(killed)
	if !ok {
		t.Fatal("no event after the kill")
	}
	gap := next.Sub(killed)
	t.Logf("takeover gap: kill → next chunk %v (last chunk before → first after %v)",
		gap.Round(time.Millisecond), next.Sub(lastBefore).Round(time.Millisecond))
	// The bound: the next chunk within 5 s of the kill with the
	// defaults (liveness_timeout 1.5 s, ack_wait 4 s).
	if gap > 5*time.Second {
		t.Errorf("the next chunk came %v after the kill; want within 5s", gap)
	}

	claims := s.frames.claims(c.id)
	if len(claims) != 2 || claims[0].Frame.Worker != owner || claims[1].Frame.Worker == owner {
		t.Errorf("claims by %v; want %s, then the other worker", claimWorkers(claims), owner)
	}
	if c.seams["takeover"] != 1 {
		t.Errorf("seams %v; want one takeover", c.seams)
	}
	expectJobStatuses(t, s.worker(claims[len(claims)-1].Frame.Worker), c.id, "done")
	// A second provider call continued the answer.
	if n := s.mockStats().ByConversation[mockupstream.ConversationKey(msgs)]; n != 2 {
		t.Errorf("the fake upstream was called %d times for the conversation; want 2", n)
	}
}

// A worker paused with SIGSTOP until another took its request over, then
// resumed with SIGCONT. The paused worker's next write is fenced: no chunk
// of it reaches the stream, its job ends "fenced", and it never
// acknowledges the request (its delivery shows one -NAK, the handover, and
// no +ACK).
func TestProcessWorkerPausedIsFenced(t *testing.T) {
	const tokens = 80
	s := start(t, options{Processes: true, Mock: mockupstream.Config{Tokens: tokens, TokenInterval: 40 * time.Millisecond}, Edges: 1, Workers: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	acks := subscribeAcks(t, s.nc)

	msgs, want := prompt("Process test: the worker is paused and wakes up fenced.", tokens)
	c, err := postStream(ctx, s.edgeProcs[0].URL, msgs, want, nil)
	must(t, err)
	defer c.close()
	// By now the other worker has heard several of the owner's heartbeats.
	must(t, c.readN(10))
	owner := s.owner(c.id, 1, 5*time.Second).Frame.Worker
	paused := s.worker(owner)
	stopped := time.Now()
	must(t, paused.Stop())
	t.Logf("SIGSTOPped %s after %d events", owner, c.tr.events)

	heir := s.owner(c.id, 2, 10*time.Second)
	t.Logf("%s claimed the stream %v after the SIGSTOP", heir.Frame.Worker, heir.At.Sub(stopped).Round(time.Millisecond))
	if heir.Frame.Worker == owner {
		t.Fatalf("the paused worker claimed the stream again")
	}
	// Let the new owner write a few chunks, then wake the old one while
	// the answer still streams.
	must(t, c.readN(c.tr.events+5))
	if c.tr.done {
		t.Fatal("the stream ended before the paused worker was woken; slow the fake upstream down")
	}
	must(t, paused.Cont())
	waitFor(t, 10*time.Second, owner+" ending its job fenced", func() bool {
		return slices.Contains(jobStatuses(paused, c.id), "fenced")
	})

	must(t, c.finish(ctx, func() string { return s.edgeProcs[0].URL }, nil))
	must(t, c.check())
	next, _ := c.firstAfter(stopped)
	t.Logf("pause gap: SIGSTOP → next chunk %v", next.Sub(stopped).Round(time.Millisecond))
	expectJobStatuses(t, paused, c.id, "fenced")
	expectJobStatuses(t, s.worker(heir.Frame.Worker), c.id, "done")
	// Nothing after the heir's claim came from the paused worker: the
	// frames heard are one claim each, and nothing follows the end.
	time.Sleep(300 * time.Millisecond)
	frames := s.frames.of(c.id)
	claims := s.frames.claims(c.id)
	if len(claims) != 2 {
		t.Errorf("claims by %v; want two", claimWorkers(claims))
	}
	if last := frames[len(frames)-1]; last.Frame.Kind != "end" {
		t.Errorf("a %s frame follows the end", last.Frame.Kind)
	}
	if c.seams["takeover"] != 1 {
		t.Errorf("seams %v; want one takeover", c.seams)
	}

	// Acknowledgements: the paused worker's delivery (the first) was
	// handed over with one -NAK and never acked; the heir's was.
	must(t, s.nc.Flush())
	first, second := acks.of(1), acks.of(2)
	t.Logf("acks of delivery 1: %v; delivery 2: %v", summarize(first), summarize(second))
	if countPrefix(first, "-NAK") != 1 || countPrefix(first, "+ACK") != 0 {
		t.Errorf("delivery 1 (paused worker): %v; want one -NAK and no +ACK", summarize(first))
	}
	if countPrefix(second, "+ACK") != 1 {
		t.Errorf("delivery 2 (heir): %v; want one +ACK", summarize(second))
	}
}

// SIGTERM drains a worker. Its streams outlive drain_timeout, so it hands
// them over, and the other worker continues each at once: the longest
// silence a client sees is far below both ack_wait and the liveness
// timeout, which are raised here so that only the drain's own handover can
// explain a short gap. A request arriving during the drain goes to the
// other worker.
func TestProcessWorkerDrainHandsOver(t *testing.T) {
	const tokens, streams = 100, 3
	s := start(t, options{Processes: true,
		Mock: mockupstream.Config{Tokens: tokens, TokenInterval: 40 * time.Millisecond}, Edges: 1, Workers: 1,
		Settings:       procs.Settings{"streams.ack_wait": "10s"},
		WorkerSettings: procs.Settings{"worker.drain_timeout": "1s", "worker.liveness_timeout": "5s"},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	edge := s.edgeProcs[0].URL
	draining := s.workerProcs[0]

	var clients []*pclient
	for i := range streams {
		msgs, want := prompt(fmt.Sprintf("Process test: drained stream %d.", i), tokens)
		c, err := postStream(ctx, edge, msgs, want, nil)
		must(t, err)
		defer c.close()
		clients = append(clients, c)
	}
	for _, c := range clients {
		must(t, c.readN(3))
	}
	other := s.startWorker(ctx, nil)
	s.workerProcs = append(s.workerProcs, other)
	for _, c := range clients {
		must(t, c.readN(c.tr.events+5))
	}
	termed := time.Now()
	must(t, draining.Term())
	// A request queued during the drain goes to the other worker. The
	// drain begins when the worker handles the signal, which a loaded
	// machine delays: the request is sent once the worker says it drains.
	relaytest.Eventually(t, 10*time.Second, 10*time.Millisecond, func() bool {
		return len(logged(draining, "worker draining", "")) == 1
	})
	lateMsgs, lateWant := prompt("Process test: a request during the drain.", tokens)
	late, err := postStream(ctx, edge, lateMsgs, lateWant, nil)
	must(t, err)
	defer late.close()
	clients = append(clients, late)

	var wg sync.WaitGroup
	errs := make([]error, len(clients))
	for i, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = c.finish(ctx, func() string { return edge }, nil)
		}()
	}
	exitCtx, exitCancel := context.WithTimeout(ctx, 10*time.Second)
	defer exitCancel()
	exitErr := draining.Wait(exitCtx)
	exited := time.Since(termed)
	wg.Wait()
	for i, c := range clients {
		must(t, errs[i])
		must(t, c.check())
	}
	if exitErr != nil {
		t.Errorf("the drained worker: %v", exitErr)
	}
	t.Logf("drained worker exited %v after SIGTERM", exited.Round(time.Millisecond))

	var gaps []string
	for _, c := range clients[:streams] {
		gap := c.maxGap(termed)
		gaps = append(gaps, gap.Round(time.Millisecond).String())
		if gap > 2*time.Second {
			t.Errorf("stream %s: %v without a chunk after SIGTERM; the handover should be immediate", c.id, gap)
		}
		claims := s.frames.claims(c.id)
		if len(claims) != 2 || claims[0].Frame.Worker != draining.Name || claims[1].Frame.Worker != other.Name {
			t.Errorf("stream %s: claims by %v; want %s, %s", c.id, claimWorkers(claims), draining.Name, other.Name)
		}
		expectJobStatuses(t, draining, c.id, "handed_over")
		expectJobStatuses(t, other, c.id, "done")
	}
	t.Logf("longest silence per stream after SIGTERM (drain_timeout 1s): %s", strings.Join(gaps, ", "))
	if claims := s.frames.claims(late.id); len(claims) != 1 || claims[0].Frame.Worker != other.Name {
		t.Errorf("the request queued during the drain was claimed by %v; want %s only", claimWorkers(claims), other.Name)
	}
	for _, msg := range []string{"worker draining", "handing streams over", "worker stopped"} {
		if len(logged(draining, msg, "")) != 1 {
			t.Errorf("the drained worker did not log %q once", msg)
		}
	}
}

func claimWorkers(claims []frameSeen) []string {
	var out []string
	for _, c := range claims {
		out = append(out, c.Frame.Worker)
	}
	return out
}

// ackLog records what was sent to the worker consumer's ack subjects
// ($JS.ACK.RELAY_REQUESTS.workers.<delivered>.<stream seq>...), by
// delivery count.
type ackLog struct {
	mu   sync.Mutex
	byDC map[string][]string
}

func subscribeAcks(t *testing.T, nc *nats.Conn) *ackLog {
	t.Helper()
	l := &ackLog{byDC: map[string][]string{}}
	_, err := nc.Subscribe("$JS.ACK.RELAY_REQUESTS.workers.>", func(m *nats.Msg) {
		tokens := strings.Split(m.Subject, ".")
		if len(tokens) < 6 {
			return
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		l.byDC[tokens[4]] = append(l.byDC[tokens[4]], string(m.Data))
	})
	must(t, err)
	must(t, nc.Flush())
	return l
}

// of returns the acks sent for the nth delivery.
func (l *ackLog) of(n int) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.byDC[fmt.Sprint(n)]...)
}

func countPrefix(acks []string, prefix string) int {
	n := 0
	for _, a := range acks {
		if strings.HasPrefix(a, prefix) {
			n++
		}
	}
	return n
}

// summarize counts acks by kind: "+WPI×3 -NAK×1".
func summarize(acks []string) string {
	counts := map[string]int{}
	var kinds []string
	for _, a := range acks {
		k, _, _ := strings.Cut(a, " ")
		if counts[k] == 0 {
			kinds = append(kinds, k)
		}
		counts[k]++
	}
	var parts []string
	for _, k := range kinds {
		parts = append(parts, fmt.Sprintf("%s×%d", k, counts[k]))
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// On three replicas, on default settings, a worker that appends many
// streams' chunks in atomic batches is SIGKILLed while they stream. The
// other worker takes each of its streams over after the last frame stored,
// whatever batch was in flight at the kill: every client gets the exact
// text, each cursor once.
func TestProcessWorkerKilledMidBatch(t *testing.T) {
	// A token every 10 ms: a worker's appends are spread over the three
	// partitions' lanes, and each lane must get them often enough to
	// batch them (chunklog.Linger).
	const tokens, streams = 160, 16
	s := start(t, options{Processes: true, ClusterNodes: 3,
		Mock:  mockupstream.Config{Tokens: tokens, TokenInterval: 10 * time.Millisecond},
		Edges: 1, Workers: 2,
	})
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	clients := streamAll(t, ctx, s, streams, tokens, "a worker dies mid-batch")
	held := map[string][]*pclient{}
	for _, c := range clients {
		owner := s.owner(c.id, 1, 5*time.Second).Frame.Worker
		held[owner] = append(held[owner], c)
	}
	var owner string
	for w, cs := range held {
		if len(cs) > len(held[owner]) {
			owner = w
		}
	}
	killed := time.Now()
	must(t, s.worker(owner).Kill())
	t.Logf("SIGKILLed %s, holding %d of %d streams", owner, len(held[owner]), streams)

	finishAll(t, ctx, s, clients)
	report, _ := faultReport(held[owner], killed)
	t.Logf("the killed worker's streams, longest silence each: %s", report)
	// Each of the killed worker's streams was claimed once more, by the
	// other worker, and its chunks had gone in batches of several streams.
	for _, c := range held[owner] {
		if claims := s.frames.claims(c.id); len(claims) != 2 || claims[1].Frame.Worker == owner {
			t.Errorf("stream %s: claims by %v; want %s, then the other worker", c.id, claimWorkers(claims), owner)
		}
	}
	expectBatched(t, ctx, s, held[owner], killed)
}

// expectBatched checks that a quarter or more of the chunks of clients'
// streams stored before t0, but each stream's first, went in atomic
// batches, so that the fault met batches in flight: on three replicas a
// worker's appends of many streams to one partition share them (fewer do
// than before partitions: a worker's streams are spread over three lanes
// of batches).
func expectBatched(t *testing.T, ctx context.Context, s *system, clients []*pclient, t0 time.Time) {
	t.Helper()
	batched, chunks := 0, 0
	for _, c := range clients {
		for _, f := range s.frames.of(c.id) {
			if f.Frame.Kind != wire.KindChunk || f.Frame.Seq < 2 || !f.At.Before(t0) {
				continue
			}
			seq, err := strconv.ParseUint(f.JSSeq, 10, 64)
			must(t, err)
			m, found, err := chunklog.LeaderGet(ctx, s.nc, "", wire.ChunkStreamOf(c.id), chunklog.LeaderQuery{Seq: seq})
			if err != nil || !found {
				t.Fatalf("leader get %d: found %v, %v", seq, found, err)
			}
			chunks++
			if m.Header.Get("Nats-Batch-Id") != "" {
				batched++
			}
		}
	}
	t.Logf("%d of %d chunks before the fault (each stream's first aside) went in atomic batches", batched, chunks)
	if chunks == 0 || batched < chunks/4 {
		t.Errorf("%d of %d chunks in atomic batches; want a quarter or more", batched, chunks)
	}
}
