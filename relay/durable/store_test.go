package durable

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/relaydev/relay/relay/chunklog"
	"github.com/relaydev/relay/relay/relaytest"
	"github.com/relaydev/relay/relay/streams"
	"github.com/relaydev/relay/relay/wire"
)

// stores returns n stores on one server, each with a connection of its
// own, as n edges have.
func stores(t *testing.T, n int) []*Store {
	t.Helper()
	s := relaytest.NATS(t)
	var out []*Store
	for range n {
		nc, js := relaytest.Connect(t, s, streams.Topology{MemoryStorage: true})
		out = append(out, New(js, chunklog.NewReader(nc, ""), func(context.Context) int { return 0 }))
	}
	return out
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// text reads a whole stream.
func text(t *testing.T, s *Store, st *Stream) string {
	t.Helper()
	p, err := s.Read(testCtx(t), st, Start, 1<<20, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	out := ""
	for _, c := range p.Chunks {
		out += string(c.Data)
	}
	return out
}

func TestProducerCheck(t *testing.T) {
	st := state{Producers: map[string]producer{"p": {Epoch: 2, Seq: 5}}}
	for _, c := range []struct {
		p       Producer
		want    Verdict
		highest uint64
	}{
		{Producer{ID: "new", Epoch: 0, Seq: 0}, Accept, 0},
		{Producer{ID: "new", Epoch: 3, Seq: 0}, Accept, 0},
		{Producer{ID: "new", Epoch: 0, Seq: 1}, SeqGap, 0},
		{Producer{ID: "p", Epoch: 2, Seq: 6}, Accept, 0},
		{Producer{ID: "p", Epoch: 2, Seq: 5}, Duplicate, 5},
		{Producer{ID: "p", Epoch: 2, Seq: 0}, Duplicate, 5},
		{Producer{ID: "p", Epoch: 2, Seq: 8}, SeqGap, 0},
		{Producer{ID: "p", Epoch: 1, Seq: 6}, StaleEpoch, 0},
		{Producer{ID: "p", Epoch: 3, Seq: 0}, Accept, 0},
		{Producer{ID: "p", Epoch: 3, Seq: 1}, BadEpochStart, 0},
	} {
		if v, highest := st.check(c.p); v != c.want || highest != c.highest {
			t.Errorf("check(%+v) = %v, %d; want %v, %d", c.p, v, highest, c.want, c.highest)
		}
	}
}

// Two edges appending the same producer's batches at once, each batch
// sent by both (a client retrying on the other edge): every batch is
// accepted once, the other copy is a duplicate, and the stream holds each
// batch once, in order.
func TestConcurrentProducerAppendsAreAcceptedOnce(t *testing.T) {
	ss := stores(t, 2)
	ctx := testCtx(t)
	st, _, _, err := ss[0].Create(ctx, "acme", "/chat/1", Spec{ContentType: "text/plain"}, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	const batches = 20
	accepted := make([]int, batches)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, s := range ss {
		wg.Go(func() {
			for seq := range uint64(batches) {
				a := Append{Data: []byte(fmt.Sprintf("[%d]", seq)), Producer: &Producer{ID: "writer", Seq: seq}}
				res, err := s.Append(ctx, st, a)
				if err != nil {
					t.Error(err)
					return
				}
				if !res.Duplicate {
					mu.Lock()
					accepted[seq]++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	want := ""
	for seq, n := range accepted {
		if n != 1 {
			t.Errorf("batch %d accepted %d times, want once", seq, n)
		}
		want += fmt.Sprintf("[%d]", seq)
	}
	if got := text(t, ss[1], st); got != want {
		t.Fatalf("stream holds %q, want %q", got, want)
	}
}

// The same path of two tenants names two streams.
func TestTenantsHaveTheirOwnStreams(t *testing.T) {
	s := stores(t, 1)[0]
	ctx := testCtx(t)
	a, _, createdA, err := s.Create(ctx, "a", "/same", Spec{ContentType: "text/plain"}, []byte("of a"), 0)
	if err != nil {
		t.Fatal(err)
	}
	b, _, createdB, err := s.Create(ctx, "b", "/same", Spec{ContentType: "text/plain"}, []byte("of b"), 0)
	if err != nil {
		t.Fatal(err)
	}
	if !createdA || !createdB || a.ID == b.ID {
		t.Fatalf("created %v and %v, ids %s and %s: want two new streams", createdA, createdB, a.ID, b.ID)
	}
	if got := text(t, s, b); got != "of b" {
		t.Fatalf("tenant b reads %q", got)
	}
	if _, err := s.Open(ctx, "c", "/same"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("another tenant opens it: %v, want ErrNotFound", err)
	}
}

// A closed stream refuses appends with its final offset, and takes its
// close again; its tail does not move with the closure.
func TestClosedStreamRefusesAppends(t *testing.T) {
	s := stores(t, 1)[0]
	ctx := testCtx(t)
	st, _, _, err := s.Create(ctx, "", "/done", Spec{ContentType: "text/plain"}, []byte("all"), 0)
	if err != nil {
		t.Fatal(err)
	}
	before, err := s.TailOf(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Append(ctx, st, Append{Close: true})
	if err != nil || !res.Closed || res.Tail != before.Offset {
		t.Fatalf("close: %+v, %v; want closed at %v", res, err, before.Offset)
	}
	var closed *ClosedError
	if _, err := s.Append(ctx, st, Append{Data: []byte("more")}); !errors.As(err, &closed) || closed.Tail != before.Offset {
		t.Fatalf("append after close: %v, want a ClosedError at %v", err, before.Offset)
	}
	if res, err := s.Append(ctx, st, Append{Close: true}); err != nil || !res.Closed {
		t.Fatalf("close again: %+v, %v", res, err)
	}
}

// A fork reads its source up to the fork point, the sub-offset's bytes of
// the next append, then its own appends; the source's later appends stay
// the source's.
func TestForkStitchesItsSource(t *testing.T) {
	s := stores(t, 1)[0]
	ctx := testCtx(t)
	src, _, _, err := s.Create(ctx, "", "/src", Spec{ContentType: "text/plain"}, []byte("one "), 0)
	if err != nil {
		t.Fatal(err)
	}
	at, err := s.TailOf(ctx, src)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, src, Append{Data: []byte("two three")}); err != nil {
		t.Fatal(err)
	}
	fork, _, _, err := s.Create(ctx, "", "/fork", Spec{Fork: &ForkSpec{Source: "/src", Offset: &at.Offset, SubOffset: 3}}, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, fork, Append{Data: []byte(" forked")}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, src, Append{Data: []byte(" four")}); err != nil {
		t.Fatal(err)
	}
	if got, want := text(t, s, fork), "one two forked"; got != want {
		t.Fatalf("fork reads %q, want %q", got, want)
	}
	if got, want := text(t, s, src), "one two three four"; got != want {
		t.Fatalf("source reads %q, want %q", got, want)
	}
	if fork.ContentType != "text/plain" {
		t.Fatalf("fork's content type %q, want the source's", fork.ContentType)
	}
}

// A read returns at most maxChunks appends, a fork's inherited ones
// counted with its own; each page but the last says it is not up to date,
// and pages read on from each other's Next give the whole stream once.
func TestReadsArePagedByChunks(t *testing.T) {
	s := stores(t, 1)[0]
	ctx := testCtx(t)
	src, _, _, err := s.Create(ctx, "", "/src", Spec{ContentType: "text/plain"}, []byte("a"), 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"b", "c"} {
		if _, err := s.Append(ctx, src, Append{Data: []byte(d)}); err != nil {
			t.Fatal(err)
		}
	}
	fork, _, _, err := s.Create(ctx, "", "/fork", Spec{Fork: &ForkSpec{Source: "/src"}}, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"d", "e", "f", "g"} {
		if _, err := s.Append(ctx, fork, Append{Data: []byte(d)}); err != nil {
			t.Fatal(err)
		}
	}
	var pages []string
	from := Start
	for range 10 {
		p, err := s.Read(ctx, fork, from, 1<<20, 2)
		if err != nil {
			t.Fatal(err)
		}
		page := ""
		for _, c := range p.Chunks {
			page += string(c.Data)
		}
		pages = append(pages, page)
		if last := len(pages) == 4; p.UpToDate != last {
			t.Fatalf("page %d %q: up to date %v", len(pages), page, p.UpToDate)
		}
		if p.UpToDate {
			break
		}
		from = p.Next
	}
	if got := fmt.Sprint(pages); got != "[ab cd ef g]" {
		t.Fatalf("pages of 2: %s, want [ab cd ef g]", got)
	}
}

// TestStreamsAreStoredInTheDurablePartitions: a new stream's id names a
// partition of Durable Streams, the one next gives, and its frames are
// stored there, none in the generations' partitions.
func TestStreamsAreStoredInTheDurablePartitions(t *testing.T) {
	ctx := testCtx(t)
	nc, js := relaytest.Connect(t, relaytest.NATS(t), streams.Topology{MemoryStorage: true, Partitions: 2})
	var turn int
	s := New(js, chunklog.NewReader(nc, ""), func(context.Context) int { turn++; return turn % 2 })
	for i, want := range []int{wire.DurablePartition(1), wire.DurablePartition(0)} {
		st, _, _, err := s.Create(ctx, "acme", fmt.Sprintf("p%d", i), Spec{ContentType: "text/plain"}, []byte("data"), 0)
		if err != nil {
			t.Fatal(err)
		}
		if wire.Partition(st.ID) != want || wire.ValidGenerationID(st.ID) {
			t.Fatalf("stream %d: id %q in partition %d, want %d", i, st.ID, wire.Partition(st.ID), want)
		}
		cs, err := js.Stream(ctx, wire.ChunkStreamName(want))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cs.GetLastMsgForSubject(ctx, wire.ChunkSubject(st.ID)); err != nil {
			t.Fatalf("stream %d: no frame in %s: %v", i, wire.ChunkStreamName(want), err)
		}
	}
	for k := range 2 {
		cs, err := js.Stream(ctx, wire.ChunkStreamName(k))
		if err != nil {
			t.Fatal(err)
		}
		if info, err := cs.Info(ctx); err != nil || info.State.Msgs != 0 {
			t.Fatalf("the generations' partition %d holds %+v (%v), want nothing", k, info.State, err)
		}
	}
}
