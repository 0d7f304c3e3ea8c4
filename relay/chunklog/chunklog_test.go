package chunklog_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/relaydev/relay/relay/chunklog"
	"github.com/relaydev/relay/relay/protocol"
	"github.com/relaydev/relay/relay/relaytest"
)

func TestAppendAndReadBack(t *testing.T) {
	nc, js := relaytest.Connect(t, relaytest.NATS(t), protocol.Topology{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r := chunklog.NewReader(nc, "")
	// Interleave two streams, and page through more frames than one batch.
	a, b := protocol.NewStreamID(), protocol.NewStreamID()
	wa := chunklog.NewWriter(js, r, a, 0, 0)
	wb := chunklog.NewWriter(js, r, b, 0, 0)
	const n = 600
	var cursors []protocol.Cursor
	for i := 1; i <= n; i++ {
		c, err := wa.Append(ctx, protocol.Frame{Kind: protocol.KindChunk, Content: fmt.Sprint(i)})
		if err != nil {
			t.Fatal(err)
		}
		cursors = append(cursors, c)
		if _, err := wb.Append(ctx, protocol.Frame{Kind: protocol.KindChunk, Content: "b"}); err != nil {
			t.Fatal(err)
		}
	}
	for i, c := range cursors {
		if c.Seq != uint64(i+1) {
			t.Fatalf("cursor %d has seq %d", i, c.Seq)
		}
	}

	after := cursors[99]
	var got []protocol.Frame
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

	subject, f, err := r.At(ctx, after.JSSeq)
	if err != nil || subject != protocol.ChunkSubject(a) || f.Seq != after.Seq {
		t.Fatalf("At(%d) = %q %+v %v", after.JSSeq, subject, f, err)
	}
	if _, _, err := r.At(ctx, 1<<40); !errors.Is(err, chunklog.ErrNoFrame) {
		t.Fatalf("At(missing) err = %v", err)
	}
}

func TestReadUnknownStreamIsEmpty(t *testing.T) {
	nc, _ := relaytest.Connect(t, relaytest.NATS(t), protocol.Topology{})
	r := chunklog.NewReader(nc, "")
	n := 0
	last, err := r.Read(context.Background(), protocol.NewStreamID(), 0, func(chunklog.Entry) error { n++; return nil })
	if err != nil || n != 0 || last != 0 {
		t.Fatalf("read unknown: n=%d last=%d err=%v", n, last, err)
	}
	if last, err := r.Last(context.Background(), protocol.NewStreamID()); err != nil || last != 0 {
		t.Fatalf("last of unknown: %d, %v", last, err)
	}
}

func TestSecondWriterFencesFirst(t *testing.T) {
	nc, js := relaytest.Connect(t, relaytest.NATS(t), protocol.Topology{})
	ctx := context.Background()
	r := chunklog.NewReader(nc, "")
	id := protocol.NewStreamID()
	old := chunklog.NewWriter(js, r, id, 0, 0)
	c, err := old.Append(ctx, protocol.Frame{Kind: protocol.KindChunk, Content: "one", Attempt: 1})
	if err != nil {
		t.Fatal(err)
	}
	// A second writer claims the stream after what it read.
	next := chunklog.NewWriter(js, r, id, c.JSSeq, c.Seq)
	if _, err := next.Append(ctx, protocol.Frame{Kind: protocol.KindClaim, Worker: "w2"}); err != nil {
		t.Fatal(err)
	}
	if _, err := old.Append(ctx, protocol.Frame{Kind: protocol.KindChunk, Content: "two", Attempt: 1}); !errors.Is(err, chunklog.ErrFenced) {
		t.Fatalf("old writer append err = %v, want ErrFenced", err)
	}
	c2, err := next.Append(ctx, protocol.Frame{Kind: protocol.KindChunk, Content: "two", Attempt: 2})
	if err != nil || c2.Seq != 2 {
		t.Fatalf("new writer append = %v, %v", c2, err)
	}
}

func TestAppendRetryAfterLostAckIsNotFenced(t *testing.T) {
	nc, js := relaytest.Connect(t, relaytest.NATS(t), protocol.Topology{})
	ctx := context.Background()
	r := chunklog.NewReader(nc, "")
	id := protocol.NewStreamID()
	w := chunklog.NewWriter(js, r, id, 0, 0)
	frame := protocol.Frame{Kind: protocol.KindChunk, Content: "once", Attempt: 1}
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
	nc, js := relaytest.Connect(t, relaytest.NATS(t), protocol.Topology{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r := chunklog.NewReader(nc, "")
	const streams, frames = 8, 20
	ids := make([]string, streams)
	for i := range ids {
		ids[i] = protocol.NewStreamID()
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
			if _, err := w.Append(ctx, protocol.Frame{Kind: protocol.KindChunk, Content: fmt.Sprint(i, "/", j)}); err != nil {
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
