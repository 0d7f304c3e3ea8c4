package relay

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/relaydev/relay/relay/chunklog"
	"github.com/relaydev/relay/relay/mockupstream"
	"github.com/relaydev/relay/relay/protocol"
	"github.com/relaydev/relay/relay/relaytest"
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
	sub, err := nc.Subscribe("$JS.ACK."+protocol.RequestStream+"."+protocol.WorkerConsumer+".>", func(m *nats.Msg) {
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

// heartbeats counts the heartbeats of a worker id seen on nc.
func heartbeats(t *testing.T, nc *nats.Conn, worker string) func() int {
	t.Helper()
	var mu sync.Mutex
	n := 0
	sub, err := nc.Subscribe(protocol.LivenessSubject, func(m *nats.Msg) {
		var hb protocol.Heartbeat
		if json.Unmarshal(m.Data, &hb) == nil && hb.Worker == worker {
			mu.Lock()
			n++
			mu.Unlock()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sub.Unsubscribe() })
	return func() int {
		mu.Lock()
		defer mu.Unlock()
		return n
	}
}

// claimedBy reports whether the stream holds a claim frame of worker.
func claimedBy(frames []chunklog.Entry, worker string) bool {
	for _, e := range frames {
		if e.Frame.Kind == protocol.KindClaim && e.Frame.Worker == worker {
			return true
		}
	}
	return false
}

// takeover is a stream that worker b took over from a paused worker a.
type takeover struct {
	h       *harness
	proxy   *pausableProxy
	a, b    *testWorker
	acks    *ackLog
	id      string
	answer  string
	gap     time.Duration
	ackWait time.Duration
}

// pausedTakeover runs worker a behind a pausable proxy with a stream in
// flight, starts worker b, pauses a once b has heard it, and returns when
// b claimed the stream, with the time from the pause to that claim (gap).
// The queue's AckWait is far longer than the liveness timeout, so only the
// heartbeats can explain a prompt takeover.
func pausedTakeover(t *testing.T) *takeover {
	const ackWait = 30 * time.Second
	h := start(t, setup{
		mock:     mockupstream.Config{Tokens: 200, TokenInterval: 10 * time.Millisecond},
		topology: protocol.Topology{AckWait: ackWait},
		noWorker: true,
	})
	tk := &takeover{h: h, ackWait: ackWait, id: protocol.NewStreamID()}
	tk.acks = watchAcks(t, h.nc)
	beatsOfA := heartbeats(t, h.nc, "worker-a")
	tk.proxy = newPausableProxy(t, h.srv.Addr().String())
	tk.a = h.startWorker(Config{ID: "worker-a"}, h.connect(tk.proxy.URL()))
	// Whatever happens, a is heard again before it is stopped (cleanups
	// run last first), so that its jobs can end.
	t.Cleanup(tk.proxy.resume)
	content := "a long answer to take over"
	tk.answer = mockupstream.AnswerText(userMessages(content), 200)
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
	// Two heartbeats of a after b subscribed: b knows what a holds.
	seen := beatsOfA()
	relaytest.Eventually(t, waitFor, 5*time.Millisecond, func() bool { return beatsOfA() >= seen+2 })

	paused := time.Now()
	tk.proxy.pause()
	relaytest.Eventually(t, tk.ackWait, 5*time.Millisecond, func() bool { return claimedBy(h.frames(tk.id), "worker-b") })
	tk.gap = time.Since(paused)
	return tk
}

func TestSilentWorkerIsHandedOverWithinLivenessTimeout(t *testing.T) {
	tk := pausedTakeover(t)
	t.Logf("worker-b claimed the stream %v after worker-a fell silent (liveness timeout %v, heartbeat interval %v, AckWait %v)",
		tk.gap.Round(time.Millisecond), DefaultLivenessTimeout, DefaultHeartbeatInterval, tk.ackWait)
	if lo, hi := DefaultLivenessTimeout-DefaultHeartbeatInterval, DefaultLivenessTimeout+time.Second; tk.gap < lo || tk.gap > hi {
		t.Fatalf("takeover after %v, want between %v and %v: bounded by the liveness timeout, far below AckWait", tk.gap, lo, hi)
	}
	frames := tk.h.waitEnd(tk.id)
	text, chunks := chunkText(t, frames)
	if text != tk.answer {
		t.Fatalf("text = %q\nwant   %q", text, tk.answer)
	}
	if end := endOf(frames); end.Status != protocol.StatusDone {
		t.Fatalf("end = %+v, want done", end)
	}
	takeovers := 0
	for _, c := range chunks {
		if c.Seam == protocol.SeamTakeover {
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
		afterClaim = afterClaim || (f.Kind == protocol.KindClaim && f.Worker == "worker-b")
		if afterClaim && f.Kind == protocol.KindChunk && f.Attempt == 1 {
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
	if unacked, waiting := h.ackPending(); unacked != 0 || waiting != 0 {
		t.Fatalf("%d unacked, %d waiting: want the request done", unacked, waiting)
	}
}
