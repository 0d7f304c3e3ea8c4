package worker

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/relay/chunklog"
	"github.com/relaydev/relay/relay/mockupstream"
	"github.com/relaydev/relay/relay/relaytest"
	"github.com/relaydev/relay/relay/streams"
	"github.com/relaydev/relay/relay/wire"
)

// ackLog records every ack, NAK and progress report sent on the worker
// consumer's reply subjects, by whoever sends it.
type ackLog struct {
	mu   sync.Mutex
	sent []ackSent
}

type ackSent struct {
	delivered string // the delivery count token of the reply subject
	body      string // "+ACK", "-NAK", "+WPI", ...
}

func watchAcks(t *testing.T, nc *nats.Conn) *ackLog {
	t.Helper()
	l := &ackLog{}
	sub, err := nc.Subscribe("$JS.ACK."+wire.RequestStream+"."+wire.WorkerConsumer+".>", func(m *nats.Msg) {
		// $JS.ACK.<stream>.<consumer>.<delivered>.<stream seq>.<consumer seq>.<ts>.<pending>
		tokens := strings.Split(m.Subject, ".")
		l.mu.Lock()
		defer l.mu.Unlock()
		l.sent = append(l.sent, ackSent{delivered: tokens[4], body: string(m.Data)})
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sub.Unsubscribe() })
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return l
}

// of counts what was sent for the given delivery count.
func (l *ackLog) of(delivered string) map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]int{}
	for _, s := range l.sent {
		if s.delivered == delivered {
			out[s.body]++
		}
	}
	return out
}

// heartbeats counts the heartbeats of a worker id seen on nc: all of
// them, and the full ones.
func heartbeats(t *testing.T, nc *nats.Conn, worker string) (all, full func() int) {
	t.Helper()
	var mu sync.Mutex
	n, nFull := 0, 0
	sub, err := nc.Subscribe(wire.LivenessSubject, func(m *nats.Msg) {
		var hb wire.Heartbeat
		if json.Unmarshal(m.Data, &hb) == nil && hb.Worker == worker {
			mu.Lock()
			n++
			if hb.Full {
				nFull++
			}
			mu.Unlock()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sub.Unsubscribe() })
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	count := func(c *int) func() int {
		return func() int {
			mu.Lock()
			defer mu.Unlock()
			return *c
		}
	}
	return count(&n), count(&nFull)
}

// claimedBy reports whether the stream holds a claim frame of worker.
func claimedBy(frames []chunklog.Entry, worker string) bool {
	for _, e := range frames {
		if e.Frame.Kind == wire.KindClaim && e.Frame.Worker == worker {
			return true
		}
	}
	return false
}

// takeover is a stream of worker a, which is paused mid-answer while
// worker b watches it.
type takeover struct {
	h     *harness
	proxy *pausableProxy
	a, b  *testWorker
	acks  *ackLog
	// beatsOfA counts a's heartbeats.
	beatsOfA func() int
	id       string
	answer   string
	// paused is when a's main connection was paused; gap the time from
	// there to b's claim (pausedTakeover).
	paused  time.Time
	gap     time.Duration
	ackWait time.Duration
}

// takeoverTokens is the length of the answer in pauseMidAnswer: it lasts
// 2s, long enough for b to hear the full heartbeat it asks a for when it
// starts (within a heartbeat interval) and then to pause a mid-answer.
const takeoverTokens = 200

// pauseMidAnswer runs worker a with its main connection behind a
// pausable proxy and a stream in flight, starts worker b, and pauses the
// proxy once b knows what a holds. a's heartbeats travel on the same
// connection, or on a direct one of their own if ownLiveness. The queue's
// AckWait is far longer than the liveness timeout, so only the heartbeats
// can explain a prompt takeover.
func pauseMidAnswer(t *testing.T, ownLiveness bool) *takeover {
	const ackWait = 30 * time.Second
	h := start(t, setup{
		mock:     mockupstream.Config{Tokens: takeoverTokens, TokenInterval: 10 * time.Millisecond},
		topology: streams.Topology{AckWait: ackWait},
		noWorker: true,
	})
	tk := &takeover{h: h, ackWait: ackWait, id: wire.NewStreamID()}
	tk.acks = watchAcks(t, h.nc)
	beatsOfA, fullBeatsOfA := heartbeats(t, h.nc, "worker-a")
	tk.beatsOfA = beatsOfA
	tk.proxy = newPausableProxy(t, h.srv.Addr().String())
	nc := h.connect(tk.proxy.URL())
	deps := Deps{NC: nc, Catalog: h.catalog, Logger: h.logger, Topology: h.topology, Gate: h.gate}
	if ownLiveness {
		deps.LivenessNC = h.connect("")
	}
	var err error
	if deps.JS, err = jetstream.New(nc); err != nil {
		t.Fatal(err)
	}
	tk.a = h.runWorker(Config{ID: "worker-a"}, deps)
	// Whatever happens, a is heard again before it is stopped (cleanups
	// run last first), so that its jobs can end.
	t.Cleanup(tk.proxy.resume)
	content := "a long answer to take over"
	tk.answer = mockupstream.AnswerText(userMessages(content), takeoverTokens)
	h.submit(tk.id, content)
	relaytest.Eventually(t, waitFor, 5*time.Millisecond, func() bool {
		_, chunks := chunkText(t, h.frames(tk.id))
		return len(chunks) > 0
	})

	tk.b = h.startWorker(Config{ID: "worker-b"}, h.connect(""))
	relaytest.Eventually(t, waitFor, 5*time.Millisecond, func() bool {
		_, ok := h.logs.find(func(l map[string]string) bool {
			return l["msg"] == "watching worker liveness" && l["worker"] == "worker-b"
		})
		return ok
	})
	// A full heartbeat of a after b subscribed (b asked for it): b knows
	// what a holds; until then it would hand nothing over.
	seen := fullBeatsOfA()
	relaytest.Eventually(t, waitFor, 5*time.Millisecond, func() bool { return fullBeatsOfA() >= seen+1 })

	tk.paused = time.Now()
	tk.proxy.pause()
	return tk
}

// pausedTakeover pauses worker a mid-answer (pauseMidAnswer, heartbeats
// on a's only connection) and returns when b claimed the stream.
func pausedTakeover(t *testing.T) *takeover {
	tk := pauseMidAnswer(t, false)
	relaytest.Eventually(t, tk.ackWait, 5*time.Millisecond, func() bool { return claimedBy(tk.h.frames(tk.id), "worker-b") })
	tk.gap = time.Since(tk.paused)
	return tk
}

// TestStalledConnectionDoesNotSilenceHeartbeats stalls the connection a
// worker streams on, but not its liveness connection: it keeps beating, so
// its request is not handed over, and it finishes the answer once its
// connection flows again.
func TestStalledConnectionDoesNotSilenceHeartbeats(t *testing.T) {
	tk := pauseMidAnswer(t, true)
	// Three liveness timeouts of heartbeats while the stream is stalled.
	beats := tk.beatsOfA()
	want := int(3 * DefaultLivenessTimeout / DefaultHeartbeatInterval)
	relaytest.Eventually(t, waitFor, 5*time.Millisecond, func() bool { return tk.beatsOfA() >= beats+want })
	if sent := tk.acks.of("1"); sent["-NAK"] != 0 {
		t.Fatalf("worker-a's delivery was handed over (%v) while it kept beating", sent)
	}
	tk.proxy.resume()
	frames := tk.h.waitEnd(tk.id)
	if claimedBy(frames, "worker-b") {
		t.Fatal("worker-b claimed the stream of a worker that kept beating")
	}
	if text, _ := chunkText(t, frames); text != tk.answer {
		t.Fatalf("text = %q\nwant   %q", text, tk.answer)
	}
	if status := tk.h.waitJobOf("worker-a", tk.id); status != "done" {
		t.Fatalf("worker-a's job = %q, want done", status)
	}
}

// TestPausedWorkerIsHandedOverWithinTwoLivenessTimeouts: a worker whose
// connection stalls (still open to the server, so its probe is not
// refused but unanswered) loses its request after its liveness timeout of
// silence and one more of an unanswered probe, far below AckWait.
func TestPausedWorkerIsHandedOverWithinTwoLivenessTimeouts(t *testing.T) {
	tk := pausedTakeover(t)
	t.Logf("worker-b claimed the stream %v after worker-a fell silent (liveness timeout %v, heartbeat interval %v, AckWait %v)",
		tk.gap.Round(time.Millisecond), DefaultLivenessTimeout, DefaultHeartbeatInterval, tk.ackWait)
	if lo, hi := 2*DefaultLivenessTimeout-DefaultHeartbeatInterval, 2*DefaultLivenessTimeout+time.Second; tk.gap < lo || tk.gap > hi {
		t.Fatalf("takeover after %v, want between %v and %v: a liveness timeout of silence and one of an unanswered probe, far below AckWait", tk.gap, lo, hi)
	}
	frames := tk.h.waitEnd(tk.id)
	text, chunks := chunkText(t, frames)
	if text != tk.answer {
		t.Fatalf("text = %q\nwant   %q", text, tk.answer)
	}
	if end := endOf(frames); end.Status != wire.StatusDone {
		t.Fatalf("end = %+v, want done", end)
	}
	takeovers := 0
	for _, c := range chunks {
		if c.Seam == wire.SeamTakeover {
			takeovers++
		}
	}
	if takeovers != 1 {
		t.Fatalf("%d takeover seams, want 1", takeovers)
	}
	if status := tk.h.waitJobOf("worker-b", tk.id); status != "done" {
		t.Fatalf("worker-b's job = %q, want done", status)
	}
}

func TestPausedWorkerWakesFencedAndNeverAcks(t *testing.T) {
	tk := pausedTakeover(t)
	h := tk.h
	// b finishes the stream while a is still paused, then a wakes up.
	frames := h.waitEnd(tk.id)
	tk.proxy.resume()
	if status := h.waitJobOf("worker-a", tk.id); status != "fenced" {
		t.Fatalf("worker-a's job = %q after waking, want fenced", status)
	}
	if again := h.frames(tk.id); len(again) != len(frames) {
		t.Fatalf("the stream grew from %d to %d frames after it ended", len(frames), len(again))
	}
	// Nothing of a's after b's claim: every chunk from there on is b's
	// attempt.
	text, chunks := chunkText(t, frames)
	if text != tk.answer {
		t.Fatalf("text = %q\nwant   %q", text, tk.answer)
	}
	afterClaim := false
	for _, e := range frames {
		f := e.Frame
		afterClaim = afterClaim || (f.Kind == wire.KindClaim && f.Worker == "worker-b")
		if afterClaim && f.Kind == wire.KindChunk && f.Attempt == 1 {
			t.Fatalf("chunk %d of worker-a's attempt after worker-b's claim", f.Seq)
		}
	}
	if len(chunks) == 0 || chunks[0].Attempt != 1 {
		t.Fatalf("worker-a published nothing before the pause")
	}
	// The first delivery (a's) got exactly one NAK, the watcher's, and no
	// ack or term; the second (b's) got b's ack.
	relaytest.Eventually(t, waitFor, 5*time.Millisecond, func() bool { return tk.acks.of("2")["+ACK"] == 1 })
	if first := tk.acks.of("1"); first["-NAK"] != 1 || first["+ACK"] != 0 || first["+TERM"] != 0 {
		t.Fatalf("sent on worker-a's delivery: %v; want one NAK and no ack", first)
	}
	h.waitAcked()
}
