package worker

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/relay/chunklog"
	"github.com/relaydev/relay/relay/mockupstream"
	"github.com/relaydev/relay/relay/relaytest"
	"github.com/relaydev/relay/relay/runecut"
	"github.com/relaydev/relay/relay/wire"
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

// serveHeld submits content as stream id to a worker whose connection
// holds back the first publish on the stream's subject, its claim, until
// release is closed, and returns the stream's frames once it ended. It
// fails the test unless the claim was held and let go by release, not by
// the hold's timeout.
func (h *harness) serveHeld(id, content string, release <-chan struct{}) []chunklog.Entry {
	h.t.Helper()
	d := &holdingDialer{subject: []byte("PUB " + wire.ChunkSubject(id) + " "), release: release}
	nc, err := nats.Connect(h.srv.ClientURL(), nats.SetCustomDialer(d))
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(nc.Close)
	h.startWorker(Config{}, nc)
	h.submit(id, content)
	frames := h.waitEnd(id)
	if held, timedOut := d.result(); !held || timedOut {
		h.t.Fatalf("claim held %v, let go by the timeout %v: want held until the upstream was called", held, timedOut)
	}
	return frames
}

// upstreamLog wraps the mock upstream: it records when each chat request
// starts and ends, and closes called at the first. With stallFirst, it
// answers nothing to the first until its client goes away.
type upstreamLog struct {
	stallFirst bool
	called     chan struct{}

	mu     sync.Mutex
	n      int
	events []string // "start 1", "end 1", ...
}

func newUpstreamLog(stallFirst bool) *upstreamLog {
	return &upstreamLog{stallFirst: stallFirst, called: make(chan struct{})}
}

func (u *upstreamLog) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			next.ServeHTTP(w, r) // the worker's key checks
			return
		}
		u.mu.Lock()
		u.n++
		n := u.n
		u.events = append(u.events, "start "+strconv.Itoa(n))
		u.mu.Unlock()
		if n == 1 {
			close(u.called)
		}
		if n == 1 && u.stallFirst {
			// Once the body is read, the server watches the connection and
			// ends the context when the client goes away.
			_, _ = io.Copy(io.Discard, r.Body)
			<-r.Context().Done()
		} else {
			next.ServeHTTP(w, r)
		}
		u.mu.Lock()
		u.events = append(u.events, "end "+strconv.Itoa(n))
		u.mu.Unlock()
	})
}

func (u *upstreamLog) log() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.events)
}

// The worker's connection holds back the claim's publish until the mock
// upstream received the call: a first delivery calls while its claim is
// being stored. Were the call made after the claim, the claim would be
// let go only by the hold's timeout.
func TestFirstDeliveryCallsWhileClaiming(t *testing.T) {
	up := newUpstreamLog(false)
	h := start(t, setup{mock: mockupstream.Config{Tokens: 10, TokenInterval: -1}, wrap: up.wrap, noWorker: true})
	id := wire.NewStreamID()
	content := "call me early"
	frames := h.serveHeld(id, content, up.called)
	if f := frames[0].Frame; f.Kind != wire.KindClaim || f.Worker != "test-worker" {
		t.Fatalf("first frame = %+v, want our claim", f)
	}
	text, _ := chunkText(t, frames)
	if want := mockupstream.AnswerText(userMessages(content), 10); text != want {
		t.Fatalf("text = %q\nwant   %q", text, want)
	}
	if end := endOf(frames); end.Status != wire.StatusDone || end.Attempts != 1 {
		t.Fatalf("end = %+v, want done after 1 attempt", end)
	}
}

// A first delivery whose stream holds frames already (a request queued
// twice) is fenced at its claim, which is held back until the upstream has
// the call: the call, which the upstream never answers, is cancelled at
// once (the job could not go on otherwise) and published nothing, and the
// job continues the stream as a takeover does.
func TestFencedFirstClaimCancelsTheCall(t *testing.T) {
	up := newUpstreamLog(true)
	gate := &recordingGate{}
	h := start(t, setup{mock: mockupstream.Config{Tokens: 20, TokenInterval: -1}, wrap: up.wrap, gate: gate, noWorker: true})
	id := wire.NewStreamID()
	content := "queued twice"
	answer := mockupstream.AnswerText(userMessages(content), 20)
	first := runecut.Len([]byte(answer), len(answer)/3)
	if err := h.appendFrames(id,
		wire.Frame{Kind: wire.KindClaim, Worker: "earlier"},
		wire.Frame{Kind: wire.KindChunk, Role: "assistant", Content: answer[:first], Provider: "mock", Model: "mock-1", Attempt: 1},
	); err != nil {
		t.Fatal(err)
	}
	frames := h.serveHeld(id, content, up.called)
	if f := frames[2].Frame; f.Kind != wire.KindClaim || f.Worker != "test-worker" {
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
	// The job went on, so the unanswered call returned: it was cancelled,
	// and the upstream saw its client go away.
	relaytest.Eventually(t, waitFor, 5*time.Millisecond, func() bool { return slices.Contains(up.log(), "end 1") })
	if got := up.log(); len(got) != 4 || got[0] != "start 1" {
		t.Fatalf("upstream requests %v, want the unanswered call and one more", got)
	}
	if got, want := gate.verdicts(), []string{"mock/mock-1:neutral", "mock/mock-1:success"}; !slices.Equal(got, want) {
		t.Fatalf("gate reports %v, want %v", got, want)
	}
}
