package edge

import (
	"context"
	"testing"
	"time"

	"github.com/relaydev/relay/relay/chunklog"
	"github.com/relaydev/relay/relay/protocol"
)

// collect calls next until the end frame and returns the frames' per-stream
// sequences.
func collect(t *testing.T, f *follower, idle time.Duration) []uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var seqs []uint64
	for !f.ended() {
		entries, err := f.next(ctx, idle)
		if err != nil {
			t.Fatalf("next after %v: %v", seqs, err)
		}
		for _, e := range entries {
			seqs = append(seqs, e.Frame.Seq)
		}
	}
	return seqs
}

func checkSeqs(t *testing.T, seqs []uint64, n int) {
	t.Helper()
	if len(seqs) != n {
		t.Fatalf("got %d frames, want %d: %v", len(seqs), n, seqs)
	}
	for i, s := range seqs {
		if s != uint64(i+1) {
			t.Fatalf("frame %d has seq %d: %v", i, s, seqs)
		}
	}
}

func TestFollowerOverflowCatchesUp(t *testing.T) {
	e := newEnv(t)
	edge := e.startEdge(Config{})
	h := edge.hub
	id := protocol.NewStreamID()
	f, err := h.follow(id, 0, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer f.close()
	// The first call reads the (empty) history and idles.
	if got, err := f.next(context.Background(), time.Millisecond); len(got) != 0 || err != nil {
		t.Fatalf("empty stream: %v, %v", got, err)
	}

	// A claim, 99 chunks and the end arrive while the client does not
	// read: two are queued, the other 99 dropped, and the follower is woken
	// to re-read them, in two batches of at most minBatch frames.
	const n = 100
	e.writeStream(id, protocol.Meta{Model: testModel}, answer(n-1)(protocol.Request{}))
	waitFor(t, func() bool { return h.stats.dropped.Load() == 99 })
	checkSeqs(t, collect(t, f, time.Minute), n)
	if got := h.stats.catchUps[catchUpWoken].Load(); got != 2 {
		t.Fatalf("%d woken catch-ups, want 2", got)
	}
	if held := h.stats.maxHeld.Load(); held > minBatch+2 {
		t.Fatalf("%d frames held at once, more than %d", held, minBatch+2)
	}
}

func TestFollowerRepairsGap(t *testing.T) {
	e := newEnv(t)
	edge := e.startEdge(Config{})
	id := protocol.NewStreamID()
	frames := answer(4)(protocol.Request{})
	cursors := e.writeStream(id, protocol.Meta{Model: testModel}, frames)
	// A follower that has frame 1, and then sees frame 3 live: frame 2 was
	// lost on the way.
	f := newFollower(edge.hub, id, cursors[0].JSSeq, 8)
	f.started = true
	third := &liveFrame{entry: chunklog.Entry{JSSeq: cursors[2].JSSeq, Frame: frames[2]}, prev: cursors[1].JSSeq}
	third.entry.Frame.Seq = 3
	f.live <- third
	f.live <- third // a duplicate is skipped
	seqs := collect(t, f, time.Minute)
	if len(seqs) != 4 || seqs[0] != 2 || seqs[3] != 5 {
		t.Fatalf("seqs %v", seqs)
	}
	if got := edge.hub.stats.catchUps[catchUpGap].Load(); got != 1 {
		t.Fatalf("%d gap catch-ups, want 1", got)
	}
}

func TestFollowerFindsLostFramesWhenIdle(t *testing.T) {
	e := newEnv(t)
	edge := e.startEdge(Config{})
	id := protocol.NewStreamID()
	// Not joined to the hub: no live frame ever arrives, as if every
	// republished message were lost.
	f := newFollower(edge.hub, id, 0, 8)
	if got, err := f.next(context.Background(), time.Millisecond); len(got) != 0 || err != nil {
		t.Fatalf("empty stream: %v, %v", got, err)
	}
	e.writeStream(id, protocol.Meta{Model: testModel}, answer(5)(protocol.Request{}))
	checkSeqs(t, collect(t, f, 5*time.Millisecond), 6)
}

func TestFollowerStopsWithTheClient(t *testing.T) {
	e := newEnv(t)
	edge := e.startEdge(Config{})
	f, err := edge.hub.follow(protocol.NewStreamID(), 0, 8)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errShuttingDown)
	if _, err := f.next(ctx, time.Minute); err != errShuttingDown {
		t.Fatalf("next with a cancelled context: %v", err)
	}
	f.close()
	if n := edge.hub.subscriptions(); n != 0 {
		t.Fatalf("%d subscriptions after the last follower left", n)
	}
}
