package relay

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/relay/mockupstream"
	"github.com/relaydev/relay/relay/protocol"
)

// redeliver fetches the queued request as a worker that dies at once
// would, and gives it back: its next delivery is a redelivery, as a
// takeover's is. No worker may run yet.
func (h *harness) redeliver() {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	msg, err := h.workerConsumer(ctx).Next(jetstream.FetchMaxWait(5 * time.Second))
	if err != nil {
		h.t.Fatal(err)
	}
	if err := msg.Nak(); err != nil {
		h.t.Fatal(err)
	}
}

// holdingDialer dials NATS connections whose first write that publishes
// on subject is held until release is closed, or for half of waitFor.
type holdingDialer struct {
	subject []byte
	release <-chan struct{}

	mu       sync.Mutex
	held     bool // a write was held
	timedOut bool // ... and let go by the timeout, not by release
}

func (d *holdingDialer) Dial(network, address string) (net.Conn, error) {
	c, err := net.Dial(network, address)
	if err != nil {
		return nil, err
	}
	return &holdingConn{Conn: c, d: d}, nil
}

func (d *holdingDialer) result() (held, timedOut bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.held, d.timedOut
}

type holdingConn struct {
	net.Conn
	d *holdingDialer
}

func (c *holdingConn) Write(b []byte) (int, error) {
	d := c.d
	d.mu.Lock()
	hold := !d.held && bytes.Contains(b, d.subject)
	d.held = d.held || hold
	d.mu.Unlock()
	if hold {
		select {
		case <-d.release:
		case <-time.After(waitFor / 2):
			d.mu.Lock()
			d.timedOut = true
			d.mu.Unlock()
		}
	}
	return c.Conn.Write(b)
}

// The worker's connection holds back the claim's publish until the mock
// upstream received the call: a first delivery calls while its claim is
// being stored. Were the call made after the claim, the claim would be
// let go only by the hold's timeout.
func TestFirstDeliveryCallsWhileClaiming(t *testing.T) {
	called := make(chan struct{})
	var once sync.Once
	h := start(t, setup{
		mock: mockupstream.Config{Tokens: 10, TokenInterval: -1},
		wrap: func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				once.Do(func() { close(called) })
				next.ServeHTTP(w, r)
			})
		},
		noWorker: true,
	})
	id := protocol.NewStreamID()
	d := &holdingDialer{subject: []byte("PUB " + protocol.ChunkSubject(id) + " "), release: called}
	nc, err := nats.Connect(h.srv.ClientURL(), nats.SetCustomDialer(d))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	h.startWorker(Config{}, nc)
	content := "call me early"
	h.submit(id, content)

	frames := h.waitEnd(id)
	if held, timedOut := d.result(); !held || timedOut {
		t.Fatalf("claim held %v, let go by the timeout %v: want held until the upstream was called", held, timedOut)
	}
	if f := frames[0].Frame; f.Kind != protocol.KindClaim || f.Worker != "test-worker" {
		t.Fatalf("first frame = %+v, want our claim", f)
	}
	text, _ := chunkText(t, frames)
	if want := mockupstream.AnswerText(userMessages(content), 10); text != want {
		t.Fatalf("text = %q\nwant   %q", text, want)
	}
	if end := endOf(frames); end.Status != protocol.StatusDone || end.Attempts != 1 {
		t.Fatalf("end = %+v, want done after 1 attempt", end)
	}
}

// A first delivery whose stream holds frames already (a request queued
// twice) is fenced at its claim: its call, which the mock stalls for far
// longer than the test waits, is cancelled at once and published nothing,
// and the job continues the stream as a takeover does.
func TestFencedFirstClaimCancelsTheCall(t *testing.T) {
	var mu sync.Mutex
	var events []string // "start N", "end N": the mock's requests, in order
	n := 0
	gate := &recordingGate{}
	h := start(t, setup{
		mock: mockupstream.Config{Tokens: 20, TokenInterval: -1},
		wrap: func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				n++
				name := strconv.Itoa(n)
				events = append(events, "start "+name)
				mu.Unlock()
				next.ServeHTTP(w, r)
				mu.Lock()
				events = append(events, "end "+name)
				mu.Unlock()
			})
		},
		gate: gate,
	})
	id := protocol.NewStreamID()
	content := "[[mock: stall_before=10m, times=1]] queued twice"
	answer := mockupstream.AnswerText(userMessages(content), 20)
	first := cutUTF8([]byte(answer), len(answer)/3)
	if err := h.appendFrames(id,
		protocol.Frame{Kind: protocol.KindClaim, Worker: "earlier"},
		protocol.Frame{Kind: protocol.KindChunk, Role: "assistant", Content: answer[:first], Provider: "mock", Model: "mock-1", Attempt: 1},
	); err != nil {
		t.Fatal(err)
	}
	h.submit(id, content)

	frames := h.waitEnd(id)
	if f := frames[2].Frame; f.Kind != protocol.KindClaim || f.Worker != "test-worker" {
		t.Fatalf("frame after the earlier owner's = %+v, want our claim", f)
	}
	text, chunks := chunkText(t, frames)
	if text != answer {
		t.Fatalf("text = %q\nwant   %q", text, answer)
	}
	for _, c := range chunks[1:] {
		if c.Attempt != 2 {
			t.Fatalf("chunk %+v: want every new chunk from the call after the claim (attempt 2)", c)
		}
	}
	h.waitJob(id)
	mu.Lock()
	got := slices.Clone(events)
	mu.Unlock()
	// The stalled call ended before the next began: the fence cancelled it.
	if want := []string{"start 1", "end 1", "start 2"}; len(got) < 3 || !slices.Equal(got[:3], want) {
		t.Fatalf("mock requests %v, want %v", got, want)
	}
	if got, want := gate.verdicts(), []string{"mock/mock-1:neutral", "mock/mock-1:success"}; !slices.Equal(got, want) {
		t.Fatalf("gate reports %v, want %v", got, want)
	}
}
