package worker

import (
	"context"
	"testing"
	"time"

	"github.com/relaydev/relay/relay/mockupstream"
	"github.com/relaydev/relay/relay/relaytest"
	"github.com/relaydev/relay/relay/streams"
	"github.com/relaydev/relay/relay/wire"
)

func TestDrainFinishesShortStreamsAndHandsOverLongOnes(t *testing.T) {
	// The short stream needs about 0.6s; the margin is for loaded machines.
	const drainTimeout = 3 * time.Second
	// A long AckWait: a prompt continuation can only come from the
	// handover.
	h := start(t, setup{
		mock:     mockupstream.Config{Tokens: 30, TokenInterval: 20 * time.Millisecond},
		topology: streams.Topology{AckWait: time.Minute},
		noWorker: true,
	})
	a := h.startWorker(Config{ID: "worker-a", DrainTimeout: drainTimeout}, nil)
	short, long := wire.NewStreamID(), wire.NewStreamID()
	// The long answer stalls after a few tokens for far longer than the
	// drain; the stall applies to the first call of the conversation only,
	// so the continuation streams at once.
	longContent := "a long one [[mock: stall_after=3, stall_for=1m]]"
	h.submit(short, "a short one")
	h.submit(long, longContent)
	relaytest.Eventually(t, waitFor, 5*time.Millisecond, func() bool {
		_, s := chunkText(t, h.frames(short))
		_, l := chunkText(t, h.frames(long))
		return len(s) > 0 && len(l) > 0
	})
	h.startWorker(Config{ID: "worker-b"}, nil)

	drainStart := time.Now()
	drained := make(chan error, 1)
	go func() { drained <- a.Drain(context.Background()) }()
	// A request queued while draining goes to b, even if one of a's pulls
	// still waiting at the server receives it.
	<-a.draining
	late := wire.NewStreamID()
	h.submit(late, "a late one")

	// The short stream finishes on a; the long one is handed over at the
	// deadline and b continues it at once.
	if status := h.waitJobOf("worker-a", short); status != "done" {
		t.Fatalf("short stream on worker-a: %q, want done", status)
	}
	if status := h.waitJobOf("worker-a", long); status != "handed_over" {
		t.Fatalf("long stream on worker-a: %q, want handed_over", status)
	}
	relaytest.Eventually(t, waitFor, 5*time.Millisecond, func() bool { return claimedBy(h.frames(long), "worker-b") })
	if d := time.Since(drainStart); d < drainTimeout || d > drainTimeout+2*time.Second {
		t.Fatalf("worker-b claimed the long stream %v after the drain began, want shortly after the %v drain timeout", d, drainTimeout)
	}
	t.Logf("worker-b claimed the long stream %v after the drain began (drain timeout %v)", time.Since(drainStart).Round(time.Millisecond), drainTimeout)
	select {
	case err := <-drained:
		if err != nil {
			t.Fatalf("Drain: %v", err)
		}
	case <-time.After(waitFor):
		t.Fatal("Drain did not return")
	}
	select {
	case <-a.Closed():
	default:
		t.Fatal("worker-a not closed after Drain returned")
	}

	for id, content := range map[string]string{short: "a short one", long: longContent, late: "a late one"} {
		frames := h.waitEnd(id)
		text, _ := chunkText(t, frames)
		if want := mockupstream.AnswerText(userMessages(content), 30); text != want {
			t.Errorf("%q: text = %q\nwant   %q", content, text, want)
		}
		if end := endOf(frames); end.Status != wire.StatusDone {
			t.Errorf("%q ended %s", content, end.Status)
		}
	}
	if claimedBy(h.frames(late), "worker-a") {
		t.Error("the draining worker took a new request")
	}
	if status := h.waitJobOf("worker-b", late); status != "done" {
		t.Fatalf("late stream on worker-b: %q, want done", status)
	}
}

func TestDrainWithNegativeTimeoutHandsOverAtOnce(t *testing.T) {
	h := start(t, setup{
		mock:     mockupstream.Config{Tokens: 100, TokenInterval: 20 * time.Millisecond},
		topology: streams.Topology{AckWait: time.Minute},
		noWorker: true,
	})
	a := h.startWorker(Config{ID: "worker-a", DrainTimeout: -1}, nil)
	id, content := wire.NewStreamID(), "hand it over now"
	h.submit(id, content)
	relaytest.Eventually(t, waitFor, 5*time.Millisecond, func() bool {
		_, chunks := chunkText(t, h.frames(id))
		return len(chunks) > 0
	})
	h.startWorker(Config{ID: "worker-b"}, nil)

	// The answer needs about 2s more; the drain does not wait for it.
	began := time.Now()
	if err := a.Drain(context.Background()); err != nil {
		t.Fatalf("Drain: %v", err)
	}
	if d := time.Since(began); d > 2*time.Second {
		t.Fatalf("Drain took %v with a negative drain timeout", d)
	}
	if status := h.waitJobOf("worker-a", id); status != "handed_over" {
		t.Fatalf("worker-a's job = %q, want handed_over", status)
	}
	frames := h.waitEnd(id)
	if !claimedBy(frames, "worker-b") {
		t.Fatal("worker-b did not continue the stream")
	}
	if text, _ := chunkText(t, frames); text != mockupstream.AnswerText(userMessages(content), 100) {
		t.Fatalf("text = %q", text)
	}
}

func TestDrainBeforeRunReturnsAtOnce(t *testing.T) {
	h := start(t, setup{noWorker: true})
	w, err := New(Config{ID: "never-ran"}, Deps{NC: h.nc, JS: h.js, Catalog: h.catalog})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := w.Drain(ctx); err != nil {
		t.Fatalf("Drain before Run: %v", err)
	}
	if err := w.Run(ctx); err != nil {
		t.Fatalf("Run after Drain: %v", err)
	}
	select {
	case <-w.Closed():
	default:
		t.Fatal("not closed")
	}
}
