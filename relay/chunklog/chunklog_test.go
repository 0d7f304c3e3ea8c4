package chunklog_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/relaydev/relay/relay/chunklog"
	"github.com/relaydev/relay/relay/relaytest"
	"github.com/relaydev/relay/relay/streams"
	"github.com/relaydev/relay/relay/wire"
)

func TestAppendAndReadBack(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Page through more frames than one batch.
	const n = 600
	r, a, cursors := interleaved(ctx, t, n)
	for i, c := range cursors {
		if c.Seq != uint64(i+1) {
			t.Fatalf("cursor %d has seq %d", i, c.Seq)
		}
	}

	after := cursors[99]
	var got []wire.Frame
	last, err := r.Read(ctx, a, after.JSSeq, func(e chunklog.Entry) error {
		got = append(got, e.Frame)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != n-100 || got[0].Seq != 101 || got[len(got)-1].Content != fmt.Sprint(n) {
		t.Fatalf("read %d frames, first %+v", len(got), got[0])
	}
	if last != cursors[n-1].JSSeq {
		t.Fatalf("last = %d, want %d", last, cursors[n-1].JSSeq)
	}

	if got, err := r.Last(ctx, a); err != nil || got != cursors[n-1].JSSeq {
		t.Fatalf("Last = %d, %v; want %d", got, err, cursors[n-1].JSSeq)
	}
	var upTo []uint64
	last, err = r.ReadUpTo(ctx, a, after.JSSeq, 3, func(e chunklog.Entry) error {
		upTo = append(upTo, e.Frame.Seq)
		return nil
	})
	if err != nil || len(upTo) != 3 || upTo[0] != 101 || upTo[2] != 103 || last != cursors[102].JSSeq {
		t.Fatalf("ReadUpTo 3 = %v, last %d, %v", upTo, last, err)
	}

	subject, f, err := r.At(ctx, a, after.JSSeq)
	if err != nil || subject != wire.ChunkSubject(a) || f.Seq != after.Seq {
		t.Fatalf("At(%d) = %q %+v %v", after.JSSeq, subject, f, err)
	}
	if _, _, err := r.At(ctx, a, 1<<40); !errors.Is(err, chunklog.ErrNoFrame) {
		t.Fatalf("At(missing) err = %v", err)
	}
}

func TestReadUnknownStreamIsEmpty(t *testing.T) {
	nc, _ := relaytest.Connect(t, relaytest.NATS(t), streams.Topology{})
	r := chunklog.NewReader(nc, "")
	n := 0
	last, err := r.Read(context.Background(), wire.NewStreamID(), 0, func(chunklog.Entry) error { n++; return nil })
	if err != nil || n != 0 || last != 0 {
		t.Fatalf("read unknown: n=%d last=%d err=%v", n, last, err)
	}
	if last, err := r.Last(context.Background(), wire.NewStreamID()); err != nil || last != 0 {
		t.Fatalf("last of unknown: %d, %v", last, err)
	}
}

func TestSecondWriterFencesFirst(t *testing.T) {
	nc, js := relaytest.Connect(t, relaytest.NATS(t), streams.Topology{})
	ctx := context.Background()
	r := chunklog.NewReader(nc, "")
	id := wire.NewStreamID()
	old := chunklog.NewWriter(js, r, id, 0, 0)
	c, err := old.Append(ctx, wire.Frame{Kind: wire.KindChunk, Content: "one", Attempt: 1})
	if err != nil {
		t.Fatal(err)
	}
	// A second writer claims the stream after what it read.
	next := chunklog.NewWriter(js, r, id, c.JSSeq, c.Seq)
	if _, err := next.Append(ctx, wire.Frame{Kind: wire.KindClaim, Worker: "w2"}); err != nil {
		t.Fatal(err)
	}
	if _, err := old.Append(ctx, wire.Frame{Kind: wire.KindChunk, Content: "two", Attempt: 1}); !errors.Is(err, chunklog.ErrFenced) {
		t.Fatalf("old writer append err = %v, want ErrFenced", err)
	}
	c2, err := next.Append(ctx, wire.Frame{Kind: wire.KindChunk, Content: "two", Attempt: 2})
	if err != nil || c2.Seq != 2 {
		t.Fatalf("new writer append = %v, %v", c2, err)
	}
}

func TestAppendRetryAfterLostAckIsNotFenced(t *testing.T) {
	nc, js := relaytest.Connect(t, relaytest.NATS(t), streams.Topology{})
	ctx := context.Background()
	r := chunklog.NewReader(nc, "")
	id := wire.NewStreamID()
	w := chunklog.NewWriter(js, r, id, 0, 0)
	frame := wire.Frame{Kind: wire.KindChunk, Content: "once", Attempt: 1}
	// The same frame stored by an attempt whose ack the writer never saw.
	lost := chunklog.NewWriter(js, r, id, 0, 0)
	if _, err := lost.Append(ctx, frame); err != nil {
		t.Fatal(err)
	}
	c, err := w.Append(ctx, frame)
	if err != nil || c.Seq != 1 {
		t.Fatalf("retried append = %v, %v; want seq 1", c, err)
	}
}

func TestConcurrentReadsGetTheirOwnReplies(t *testing.T) {
	nc, js := relaytest.Connect(t, relaytest.NATS(t), streams.Topology{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r := chunklog.NewReader(nc, "")
	const streams, frames = 8, 20
	ids := make([]string, streams)
	for i := range ids {
		ids[i] = wire.NewStreamID()
	}
	// Interleaved, so that every read spans the others' frames.
	for j := 1; j <= frames; j++ {
		for i, id := range ids {
			w := chunklog.NewWriter(js, r, id, 0, 0)
			if j > 1 {
				last, err := r.Last(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				w = chunklog.NewWriter(js, r, id, last, uint64(j-1))
			}
			if _, err := w.Append(ctx, wire.Frame{Kind: wire.KindChunk, Content: fmt.Sprint(i, "/", j)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	errs := make(chan error, streams)
	for i, id := range ids {
		go func() {
			n := 0
			_, err := r.ReadUpTo(ctx, id, 0, frames, func(e chunklog.Entry) error {
				n++
				if want := fmt.Sprint(i, "/", n); e.Frame.Content != want {
					return fmt.Errorf("stream %d: frame %q, want %q", i, e.Frame.Content, want)
				}
				return nil
			})
			if err == nil && n != frames {
				err = fmt.Errorf("stream %d: %d frames, want %d", i, n, frames)
			}
			errs <- err
		}()
	}
	for range ids {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

// A read takes its first frames one at a time and the rest in batches: the
// frames it passes on are the same whatever the limit, on either side of
// that switch.
func TestReadUpToAnyLimitReadsTheFramesAfterTheCursor(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	const n = 400
	r, a, cursors := interleaved(ctx, t, n)
	const from = 10 // frames after cursors[from-1]
	for _, limit := range []int{1, 2, 15, 16, 17, 40, 300, n, 0} {
		var got []uint64
		last, err := r.ReadUpTo(ctx, a, cursors[from-1].JSSeq, limit, func(e chunklog.Entry) error {
			got = append(got, e.Frame.Seq)
			return nil
		})
		want := n - from
		if limit > 0 {
			want = min(want, limit)
		}
		if err != nil || len(got) != want {
			t.Fatalf("limit %d: %d frames, %v; want %d", limit, len(got), err, want)
		}
		for i, seq := range got {
			if seq != uint64(from+i+1) {
				t.Fatalf("limit %d: frame %d has seq %d, want %d", limit, i, seq, from+i+1)
			}
		}
		if want := cursors[from+want-1].JSSeq; last != want {
			t.Fatalf("limit %d: last = %d, want %d", limit, last, want)
		}
	}
}

// fn's error ends a read, whether it came in a frame read alone or in a
// batch, and the read reports the last frame fn took.
func TestReadStopsAtTheCallbacksError(t *testing.T) {
	nc, js := relaytest.Connect(t, relaytest.NATS(t), streams.Topology{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r := chunklog.NewReader(nc, "")
	id := wire.NewStreamID()
	w := chunklog.NewWriter(js, r, id, 0, 0)
	var cursors []wire.Cursor
	for range 60 {
		c, err := w.Append(ctx, wire.Frame{Kind: wire.KindChunk, Content: "x"})
		if err != nil {
			t.Fatal(err)
		}
		cursors = append(cursors, c)
	}
	stop := errors.New("stop")
	for _, at := range []int{3, 40} {
		n := 0
		last, err := r.Read(ctx, id, 0, func(chunklog.Entry) error {
			if n++; n == at {
				return stop
			}
			return nil
		})
		if !errors.Is(err, stop) || n != at || last != cursors[at-2].JSSeq {
			t.Fatalf("stop at frame %d: err %v after %d frames, last %d; want last %d", at, err, n, last, cursors[at-2].JSSeq)
		}
	}
}

// interleaved appends n frames to a new stream a (contents "1" to n),
// each followed by a frame of another stream, and returns a reader, a and
// the cursors of a's frames.
func interleaved(ctx context.Context, t *testing.T, n int) (*chunklog.Reader, string, []wire.Cursor) {
	t.Helper()
	nc, js := relaytest.Connect(t, relaytest.NATS(t), streams.Topology{})
	r := chunklog.NewReader(nc, "")
	a, b := wire.NewStreamID(), wire.NewStreamID()
	wa := chunklog.NewWriter(js, r, a, 0, 0)
	wb := chunklog.NewWriter(js, r, b, 0, 0)
	var cursors []wire.Cursor
	for i := 1; i <= n; i++ {
		c, err := wa.Append(ctx, wire.Frame{Kind: wire.KindChunk, Content: fmt.Sprint(i)})
		if err != nil {
			t.Fatal(err)
		}
		cursors = append(cursors, c)
		if _, err := wb.Append(ctx, wire.Frame{Kind: wire.KindChunk, Content: "b"}); err != nil {
			t.Fatal(err)
		}
	}
	return r, a, cursors
}
