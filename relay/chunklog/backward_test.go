package chunklog_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/relay/chunklog"
	"github.com/relaydev/relay/relay/relaytest"
	"github.com/relaydev/relay/relay/streams"
	"github.com/relaydev/relay/relay/wire"
)

// TestAppendChainsEachFrameOnTheOneBefore checks the header a backward
// read follows, as nats-server stores it: each frame names the sequence of
// its stream's frame before it, the first names 0.
func TestAppendChainsEachFrameOnTheOneBefore(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	nc, js := relaytest.Connect(t, relaytest.NATS(t), streams.Topology{})
	r := chunklog.NewReader(nc, "")
	a, b := wire.NewStreamID(), wire.NewStreamID()
	wa := chunklog.NewWriter(js, r, a, 0, 0)
	wb := chunklog.NewWriter(js, r, b, 0, 0)
	var want []uint64 // JetStream sequences of a's frames
	for i := range 5 {
		c, err := wa.Append(ctx, wire.Frame{Kind: wire.KindChunk, Content: fmt.Sprint(i)})
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, c.JSSeq)
		if _, err := wb.Append(ctx, wire.Frame{Kind: wire.KindChunk, Content: "b"}); err != nil {
			t.Fatal(err)
		}
	}
	stream, err := js.Stream(ctx, wire.ChunkStream)
	if err != nil {
		t.Fatal(err)
	}
	prev := "0"
	for _, seq := range want {
		m, err := stream.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		if got := m.Header.Get(jetstream.ExpectedLastSubjSeqHeader); got != prev {
			t.Fatalf("frame at %d: %s = %q, want %q", seq, jetstream.ExpectedLastSubjSeqHeader, got, prev)
		}
		prev = strconv.FormatUint(seq, 10)
	}
}

// TestReadReadsTheSameFramesBackAsForward compares Read with a forward
// read after every cursor of a stream whose frames are one message apart
// (Read reads forward too, once it has judged the gap) and 100 apart
// (Read follows the chain back); and ReadUpTo with the forward read of the
// same limit, which it matches whether it goes back or, with more frames
// to read than its limit, forward.
func TestReadReadsTheSameFramesBackAsForward(t *testing.T) {
	for _, tc := range []struct {
		gap  int
		back bool
	}{{1, false}, {100, true}} {
		t.Run(fmt.Sprintf("gap %d", tc.gap), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			nc, js := relaytest.Connect(t, relaytest.NATS(t), streams.Topology{})
			r := chunklog.NewReader(nc, "")
			id := wire.NewStreamID()
			cursors := spaced(ctx, t, js, r, id, 20, tc.gap, true)
			afters := []uint64{0}
			for _, c := range cursors {
				afters = append(afters, c.JSSeq)
			}
			for _, after := range afters {
				var back, forward []chunklog.Entry
				before := chunklog.BackReads(r)
				lastBack, err := r.Read(ctx, id, after, func(e chunklog.Entry) error { back = append(back, e); return nil })
				if err != nil {
					t.Fatal(err)
				}
				wentBack := chunklog.BackReads(r) > before
				lastForward, err := chunklog.ReadForward(r, ctx, id, after, 0, func(e chunklog.Entry) error { forward = append(forward, e); return nil })
				if err != nil {
					t.Fatal(err)
				}
				if lastBack != lastForward || !slices.EqualFunc(back, forward, sameEntry) {
					t.Fatalf("after %d: Read gave %d frames up to %d, ReadUpTo %d up to %d", after, len(back), lastBack, len(forward), lastForward)
				}
				// A read of judgeAfter frames or fewer finishes its walk
				// back before it judges the gap.
				want := tc.back || len(forward) <= chunklog.JudgeAfter
				if len(forward) > 0 && wentBack != want {
					t.Fatalf("after %d (%d frames): read back = %v, want %v", after, len(forward), wentBack, want)
				}
				for _, limit := range []int{1, 2, 5, 9, 30} {
					var upTo, forwardUpTo []chunklog.Entry
					lastUpTo, err := r.ReadUpTo(ctx, id, after, limit, func(e chunklog.Entry) error { upTo = append(upTo, e); return nil })
					if err != nil {
						t.Fatal(err)
					}
					lastForwardUpTo, err := chunklog.ReadForward(r, ctx, id, after, limit, func(e chunklog.Entry) error { forwardUpTo = append(forwardUpTo, e); return nil })
					if err != nil {
						t.Fatal(err)
					}
					if lastUpTo != lastForwardUpTo || !slices.EqualFunc(upTo, forwardUpTo, sameEntry) {
						t.Fatalf("after %d, limit %d: ReadUpTo gave %d frames up to %d, forward %d up to %d", after, limit, len(upTo), lastUpTo, len(forwardUpTo), lastForwardUpTo)
					}
				}
			}
		})
	}
}

// TestCatchUpsOfFarApartFramesMakeTheServerWalkNothing reads a stream
// whose frames lie 100 messages apart as a follower catches up: from
// every cursor, a few frames behind, and the whole stream. No read asks
// the server for the next message of the stream after a sequence, which it
// would find by walking the other streams' messages in between; only a
// read of one frame does (one round trip for a resume's first event).
func TestCatchUpsOfFarApartFramesMakeTheServerWalkNothing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, id, cursors, sent := farApart(ctx, t, 12)
	afters := []uint64{0}
	for _, c := range cursors[:len(cursors)-1] {
		afters = append(afters, c.JSSeq)
	}
	for _, after := range afters {
		n := 0
		if _, err := r.ReadUpTo(ctx, id, after, 64, func(chunklog.Entry) error { n++; return nil }); err != nil || n == 0 {
			t.Fatalf("after %d: read %d frames, %v", after, n, err)
		}
		for _, req := range sent() {
			if req.Next != "" {
				t.Fatalf("after %d: a read of %d frames asked for the next message of %s", after, n, req.Next)
			}
		}
	}
	if _, err := r.ReadUpTo(ctx, id, cursors[3].JSSeq, 1, func(chunklog.Entry) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if reqs := sent(); len(reqs) != 1 || reqs[0].Next == "" {
		t.Fatalf("a read of one frame sent %+v, want one get of the next message", reqs)
	}
}

// TestADeepCatchUpGoesForwardAfterJudging reads 16 frames from the start
// of a stream of 40 far apart: a walk back to the cursor would take 40
// steps and deliver only 16, so the read judges after JudgeAfter steps
// that more than its limit lie behind, and reads forward.
func TestADeepCatchUpGoesForwardAfterJudging(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, id, _, sent := farApart(ctx, t, 40)
	var got []string
	if _, err := r.ReadUpTo(ctx, id, 0, 16, func(e chunklog.Entry) error { got = append(got, e.Frame.Content); return nil }); err != nil {
		t.Fatal(err)
	}
	if want := []string{"1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12", "13", "14", "15", "16"}; !slices.Equal(got, want) {
		t.Fatalf("read %q, want %q", got, want)
	}
	steps := 0
	for _, req := range sent() {
		if req.Next == "" && req.Last == "" && req.Batch == 0 {
			steps++
		}
	}
	if steps != chunklog.JudgeAfter {
		t.Fatalf("%d steps back, want %d", steps, chunklog.JudgeAfter)
	}
}

// farApart stores a stream of n chunk frames 100 messages apart, through
// a Writer, and returns a reader, the stream's id and cursors, and the
// direct gets sent from then on (directGets).
func farApart(ctx context.Context, t *testing.T, n int) (*chunklog.Reader, string, []wire.Cursor, func() []getRequest) {
	t.Helper()
	s := relaytest.NATS(t)
	nc, js := relaytest.Connect(t, s, streams.Topology{})
	r := chunklog.NewReader(nc, "")
	id := wire.NewStreamID()
	cursors := spaced(ctx, t, js, r, id, n, 100, true)
	return r, id, cursors, directGets(t, s)
}

func sameEntry(a, b chunklog.Entry) bool {
	return a.JSSeq == b.JSSeq && a.Frame.Seq == b.Frame.Seq && a.Frame.Content == b.Frame.Content
}

// spaced stores n chunk frames of stream id, gap messages of other
// subjects apart; chained, through a Writer, else published without the
// expected-last-subject-sequence header. It returns their cursors.
func spaced(ctx context.Context, t *testing.T, js jetstream.JetStream, r *chunklog.Reader, id string, n, gap int, chained bool) []wire.Cursor {
	t.Helper()
	w := chunklog.NewWriter(js, r, id, 0, 0)
	var cursors []wire.Cursor
	for i := 1; i <= n; i++ {
		f := wire.Frame{Kind: wire.KindChunk, Content: fmt.Sprint(i)}
		var c wire.Cursor
		var err error
		if chained {
			c, err = w.Append(ctx, f)
		} else {
			f.Seq = uint64(i)
			var ack *jetstream.PubAck
			ack, err = js.PublishMsg(ctx, &nats.Msg{Subject: wire.ChunkSubject(id), Data: f.Encode()})
			if err == nil {
				c = wire.Cursor{Seq: f.Seq, JSSeq: ack.Sequence}
			}
		}
		if err != nil {
			t.Fatal(err)
		}
		cursors = append(cursors, c)
		for j := range gap {
			if _, err := js.Publish(ctx, wire.ChunkSubject(fmt.Sprintf("other%d", j)), []byte(`{"kind":"chunk","seq":1}`)); err != nil {
				t.Fatal(err)
			}
		}
	}
	return cursors
}

// TestReadForwardWhenFramesAreNotChained reads a stream whose frames, far
// apart, were stored without the expected-last-subject-sequence header,
// by a publisher other than a Writer: Read falls back to reading forward
// and still returns every frame.
func TestReadForwardWhenFramesAreNotChained(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	nc, js := relaytest.Connect(t, relaytest.NATS(t), streams.Topology{})
	r := chunklog.NewReader(nc, "")
	id := wire.NewStreamID()
	spaced(ctx, t, js, r, id, 3, 100, false)
	var got []string
	if _, err := r.Read(ctx, id, 0, func(e chunklog.Entry) error { got = append(got, e.Frame.Content); return nil }); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []string{"1", "2", "3"}) {
		t.Fatalf("read %q", got)
	}
}

// BenchmarkReadInterleaved reads a 60-frame stream whose frames are each
// 2,000 messages of other streams apart, as at 2,000 streams of one token
// at a time: forward (a plain direct get per frame for the first 16, then
// batches: the server walks the messages in between) and back along the
// chain (a lookup per frame). The server runs in this process, so ns/op
// includes its work.
func BenchmarkReadInterleaved(b *testing.B) {
	const frames, gap = 60, 2000
	ctx := context.Background()
	nc, js := relaytest.Connect(b, relaytest.NATS(b), streams.Topology{})
	r := chunklog.NewReader(nc, "")
	id := wire.NewStreamID()
	w := chunklog.NewWriter(js, r, id, 0, 0)
	for i := range frames {
		if _, err := w.Append(ctx, wire.Frame{Kind: wire.KindChunk, Content: fmt.Sprint(i)}); err != nil {
			b.Fatal(err)
		}
		for j := range gap {
			if _, err := js.PublishAsync(wire.ChunkSubject(fmt.Sprintf("other%d", j)), []byte(`{"kind":"chunk","seq":1,"content":"x"}`)); err != nil {
				b.Fatal(err)
			}
		}
		select {
		case <-js.PublishAsyncComplete():
		case <-time.After(10 * time.Second):
			b.Fatal("the other streams' frames were not stored within 10s")
		}
	}
	read := func(b *testing.B, fn func(func(chunklog.Entry) error) (uint64, error)) {
		for b.Loop() {
			n := 0
			if _, err := fn(func(chunklog.Entry) error { n++; return nil }); err != nil || n != frames {
				b.Fatalf("read %d frames, %v", n, err)
			}
		}
	}
	b.Run("forward", func(b *testing.B) {
		read(b, func(fn func(chunklog.Entry) error) (uint64, error) { return chunklog.ReadForward(r, ctx, id, 0, 0, fn) })
	})
	b.Run("back", func(b *testing.B) {
		read(b, func(fn func(chunklog.Entry) error) (uint64, error) { return r.Read(ctx, id, 0, fn) })
	})
}

// TestReadForwardPastAGoneFrame deletes a frame in the middle of a stream
// whose frames lie far apart, as a full stream discards its oldest: the
// chain back from the last frame breaks there, and Read reads forward,
// returning every frame left.
func TestReadForwardPastAGoneFrame(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	nc, js := relaytest.Connect(t, relaytest.NATS(t), streams.Topology{})
	r := chunklog.NewReader(nc, "")
	id := wire.NewStreamID()
	cursors := spaced(ctx, t, js, r, id, 4, 100, true)
	stream, err := js.Stream(ctx, wire.ChunkStream)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.DeleteMsg(ctx, cursors[1].JSSeq); err != nil {
		t.Fatal(err)
	}
	var got []string
	if _, err := r.Read(ctx, id, 0, func(e chunklog.Entry) error { got = append(got, e.Frame.Content); return nil }); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []string{"1", "3", "4"}) {
		t.Fatalf("read %q", got)
	}
}
