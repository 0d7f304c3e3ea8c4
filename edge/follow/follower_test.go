package follow

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/relaydev/relay/relay/chunklog"
	"github.com/relaydev/relay/relay/wire"
)

// collect calls next until the end frame and returns the frames' per-stream
// sequences.
func collect(t *testing.T, f *Follower, idle time.Duration) []uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var seqs []uint64
	for !f.Ended() {
		entries, err := f.Next(ctx, idle)
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
	e := newLogEnv(t)
	h := e.hub
	id := wire.NewStreamID()
	f, err := h.Follow(id, 0, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// The first call reads the (empty) history and idles.
	if got, err := f.Next(context.Background(), time.Millisecond); len(got) != 0 || err != nil {
		t.Fatalf("empty stream: %v, %v", got, err)
	}

	// A claim, 99 chunks and the end arrive while the client does not
	// read: two are queued, the other 99 dropped, and the follower is woken
	// to re-read them, in two batches of at most MinBatch frames.
	const n = 100
	e.write(id, answer(n-1))
	waitFor(t, func() bool { return h.stats.dropped.Load() == 99 })
	checkSeqs(t, collect(t, f, time.Minute), n)
	if got := h.stats.catchUps[catchUpWoken].Load(); got != 2 {
		t.Fatalf("%d woken catch-ups, want 2", got)
	}
	if held := h.stats.maxHeld.Load(); held > MinBatch+2 {
		t.Fatalf("%d frames held at once, more than %d", held, MinBatch+2)
	}
}

func TestFollowerRepairsGap(t *testing.T) {
	e := newLogEnv(t)
	id := wire.NewStreamID()
	frames := answer(4)
	cursors := e.write(id, frames)
	// A follower that has frame 1, and then sees frame 3 live: frame 2 was
	// lost on the way.
	f := newFollower(e.hub, id, cursors[0].JSSeq, 8)
	f.phase = live
	third := &liveFrame{entry: chunklog.Entry{JSSeq: cursors[2].JSSeq, Frame: frames[2]}, prev: cursors[1].JSSeq}
	third.entry.Frame.Seq = 3
	f.push(third)
	f.push(third) // a duplicate is skipped
	seqs := collect(t, f, time.Minute)
	if len(seqs) != 4 || seqs[0] != 2 || seqs[3] != 5 {
		t.Fatalf("seqs %v", seqs)
	}
	if got := e.hub.stats.catchUps[catchUpGap].Load(); got != 1 {
		t.Fatalf("%d gap catch-ups, want 1", got)
	}
}

func TestFollowerFindsLostFramesWhenIdle(t *testing.T) {
	e := newLogEnv(t)
	id := wire.NewStreamID()
	// Not joined to the hub: no live frame ever arrives, as if every
	// republished message were lost.
	f := newFollower(e.hub, id, 0, 8)
	if got, err := f.Next(context.Background(), time.Millisecond); len(got) != 0 || err != nil {
		t.Fatalf("empty stream: %v, %v", got, err)
	}
	e.write(id, answer(5))
	checkSeqs(t, collect(t, f, 5*time.Millisecond), 6)
}

func TestFollowerStopsWithTheClient(t *testing.T) {
	e := newLogEnv(t)
	f, err := e.hub.Follow(wire.NewStreamID(), 0, 8)
	if err != nil {
		t.Fatal(err)
	}
	errGone := errors.New("the client went away")
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errGone)
	if _, err := f.Next(ctx, time.Minute); err != errGone {
		t.Fatalf("next with a cancelled context: %v", err)
	}
	f.Close()
	if n := e.hub.Streams(); n != 0 {
		t.Fatalf("%d subscriptions after the last follower left", n)
	}
}

// flakyHistory is a log whose reads fail while fails is above zero. asked
// records its reads: "ReadUpTo" or "ReadOn", and the limit.
type flakyHistory struct {
	fails  int
	frames []chunklog.Entry
	asked  []string
	// While stale is above zero, a read sees only the frames up to
	// visible, as from a replica behind the leader, and counts down.
	stale   int
	visible uint64
}

var errFlaky = errors.New("flaky: read timed out")

func (h *flakyHistory) ReadUpTo(_ context.Context, _ string, after uint64, limit int, fn func(chunklog.Entry) error) (uint64, error) {
	h.asked = append(h.asked, fmt.Sprint("ReadUpTo ", limit))
	return h.read(after, limit, fn)
}

func (h *flakyHistory) ReadOn(_ context.Context, _ string, after uint64, limit int, fn func(chunklog.Entry) error) (uint64, error) {
	h.asked = append(h.asked, fmt.Sprint("ReadOn ", limit))
	return h.read(after, limit, fn)
}

func (h *flakyHistory) read(after uint64, limit int, fn func(chunklog.Entry) error) (uint64, error) {
	if h.fails > 0 {
		h.fails--
		return after, errFlaky
	}
	stale := h.stale > 0
	if stale {
		h.stale--
	}
	for _, e := range h.frames {
		if e.JSSeq <= after {
			continue
		}
		if stale && e.JSSeq > h.visible {
			break
		}
		if limit == 0 {
			break
		}
		limit--
		if err := fn(e); err != nil {
			return e.JSSeq, err
		}
		after = e.JSSeq
	}
	return after, nil
}

func (h *flakyHistory) Last(context.Context, string) (uint64, error) {
	if h.fails > 0 {
		h.fails--
		return 0, errFlaky
	}
	return h.frames[len(h.frames)-1].JSSeq, nil
}

func flakyFrames() []chunklog.Entry {
	return []chunklog.Entry{
		{JSSeq: 3, Frame: wire.Frame{Kind: wire.KindClaim}},
		{JSSeq: 7, Frame: wire.Frame{Kind: wire.KindChunk, Seq: 1, Content: "a"}},
		{JSSeq: 9, Frame: wire.Frame{Kind: wire.KindEnd, Seq: 2, Status: wire.StatusDone}},
	}
}

// A resume reads its first frame alone and the next ones starting with
// plain gets (ReadUpTo), since a client back from a blip misses few; once
// a read stopped at a whole batch, the catch-up is long and reads on in
// batches only (ReadOn).
func TestFollowerReadsOnALongCatchUpInBatches(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const chunks = 200
		var frames []chunklog.Entry
		for i := 1; i <= chunks; i++ {
			frames = append(frames, chunklog.Entry{JSSeq: uint64(2 * i), Frame: wire.Frame{Kind: wire.KindChunk, Seq: uint64(i)}})
		}
		frames = append(frames, chunklog.Entry{JSSeq: 2*chunks + 2, Frame: wire.Frame{Kind: wire.KindEnd, Seq: chunks + 1}})
		hist := &flakyHistory{frames: frames}
		f := newFollower(&Hub{hist: hist}, wire.NewStreamID(), 0, 8)
		defer f.Close()
		checkSeqs(t, collect(t, f, time.Minute), chunks+1)
		// 1 + 64 + 64 + 64 frames, then the 8 left.
		want := []string{"ReadUpTo 1", "ReadUpTo 64", "ReadOn 64", "ReadOn 64", "ReadOn 64"}
		if !slices.Equal(hist.asked, want) {
			t.Fatalf("reads %q, want %q", hist.asked, want)
		}
	})
}

func TestFollowerRetriesFailedReads(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hist := &flakyHistory{fails: 3, frames: flakyFrames()}
		h := &Hub{hist: hist}
		f := newFollower(h, wire.NewStreamID(), 0, 8)
		defer f.Close()
		// The longest delays the backoff can draw: just under its ceilings.
		f.readRetry.Rand = func(n int64) int64 { return n - 1 }
		start := time.Now()
		checkSeqs(t, collect(t, f, time.Minute), 2)
		if got := h.stats.readRetries.Load(); got != 3 {
			t.Fatalf("%d retries, want 3", got)
		}
		// Three backoffs, with ceilings 50, 100 and 200 ms.
		if waited, want := time.Since(start), 350*time.Millisecond-3; waited != want {
			t.Fatalf("delivered after %v, want %v", waited, want)
		}
	})
}

func TestFollowerKeepsTheClientWhileReadsFail(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hist := &flakyHistory{fails: 1 << 30, frames: flakyFrames()}
		f := newFollower(&Hub{hist: hist}, wire.NewStreamID(), 0, 8)
		defer f.Close()
		start := time.Now()
		keepalives := 0
		for {
			got, err := f.Next(context.Background(), 15*time.Second)
			if err != nil {
				if !errors.Is(err, errFlaky) {
					t.Fatalf("next: %v", err)
				}
				break
			}
			if len(got) != 0 {
				t.Fatalf("frames from a failing log: %v", got)
			}
			keepalives++
		}
		if failed := time.Since(start); failed < readGiveUp || failed > readGiveUp+readRetryMax {
			t.Fatalf("gave up after %v, want %v", failed, readGiveUp)
		}
		if want := int(readGiveUp / (15 * time.Second)); keepalives < want-1 {
			t.Fatalf("%d keepalives while reads failed, want about %d", keepalives, want)
		}
	})
}

// A live frame that shows a gap proves the frames before it stored; a
// replica behind the leader may not hold them yet when the follower reads
// them. The follower takes the live frame itself if the read reached the
// frame before it, and reads again shortly if not: it does not wait for the
// next live frame or for idle, which for the end frame is a stall.
func TestFollowerRereadsAReplicaBehindTheLiveFeed(t *testing.T) {
	for _, tc := range []struct {
		name          string
		stale         int
		visible       uint64
		rereads       int
		waitedAtLeast time.Duration
		waitedAtMost  time.Duration
	}{
		// The replica holds the chunk, not yet the end frame: the end frame
		// comes from the live feed, at once.
		{name: "up to the frame before", stale: 1, visible: 7, waitedAtMost: time.Nanosecond},
		// The replica holds neither, for two reads: two re-reads, after
		// backoffs of at most 50 and 100 ms.
		{name: "behind", stale: 2, visible: 3, rereads: 2, waitedAtLeast: time.Millisecond, waitedAtMost: 150 * time.Millisecond},
		// A replica that stays behind: staleRetries re-reads, then the
		// idle catch-up (after a second here) finds the frames.
		{name: "stays behind", stale: 1 + staleRetries, visible: 3, rereads: staleRetries, waitedAtLeast: time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				frames := flakyFrames()
				hist := &flakyHistory{frames: frames, stale: tc.stale, visible: tc.visible}
				h := &Hub{hist: hist}
				// The follower has the claim (3); the end frame (9) arrives
				// live, but the chunk (7) before it did not.
				f := newFollower(h, wire.NewStreamID(), 3, 8)
				f.phase = live
				defer f.Close()
				f.readRetry.Rand = func(n int64) int64 { return n - 1 }
				f.push(&liveFrame{entry: frames[2], prev: 7})
				start := time.Now()
				checkSeqs(t, collect(t, f, time.Second), 2)
				waited := time.Since(start)
				if got := h.stats.staleReads.Load(); got != uint64(tc.rereads) {
					t.Errorf("%d re-reads, want %d", got, tc.rereads)
				}
				if waited < tc.waitedAtLeast || tc.waitedAtMost > 0 && waited > tc.waitedAtMost {
					t.Errorf("delivered after %v, want between %v and %v", waited, tc.waitedAtLeast, tc.waitedAtMost)
				}
			})
		})
	}
}

// TestReleasedBatchKeepsNothing: a batch handed back is cleared, so the
// pool holds no frame's text alive.
func TestReleasedBatchKeepsNothing(t *testing.T) {
	f := &Follower{}
	batch := f.emit(chunklog.Entry{JSSeq: 7, Frame: wire.Frame{Kind: wire.KindEnd, Seq: 3, Status: wire.StatusDone}}, nil)
	Release(batch)
	if left := batch[:1][0]; left.JSSeq != 0 || left.Frame.Kind != "" {
		t.Fatalf("released batch still holds %+v", left)
	}
}

// TestLiveFrameOutlivesItsFirstTaker: a live frame queued for two
// followers of a stream is intact for the second after the first took it
// (frames go back to a pool once the last follower took them).
func TestLiveFrameOutlivesItsFirstTaker(t *testing.T) {
	id := wire.NewStreamID()
	h := &Hub{streams: map[string]*hubStream{}}
	a, b := newFollower(h, id, 0, 8), newFollower(h, id, 0, 8)
	a.phase, b.phase = live, live
	h.streams[id] = &hubStream{followers: map[*Follower]struct{}{a: {}, b: {}}}
	chunk := wire.Frame{Kind: wire.KindChunk, Seq: 1, Content: "hi"}
	h.dispatch(&nats.Msg{
		Subject: wire.LiveSubject(id),
		Header:  nats.Header{wire.HeaderSequence: {"5"}, wire.HeaderLastSequence: {"0"}},
		Data:    chunk.Encode(),
	})
	for _, f := range []*Follower{a, b} {
		out, ok, err := f.Poll(t.Context())
		if !ok || err != nil || len(out) != 1 || out[0].JSSeq != 5 || out[0].Frame.Content != "hi" {
			t.Fatalf("took %+v (ok %v, err %v), want the chunk at sequence 5", out, ok, err)
		}
	}
}
