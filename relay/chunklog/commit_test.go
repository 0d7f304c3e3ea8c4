package chunklog_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/relay/chunklog"
	"github.com/relaydev/relay/relay/relaytest"
	"github.com/relaydev/relay/relay/streams"
	"github.com/relaydev/relay/relay/wire"
)

// r3 is a three-server cluster with the relay's streams on three
// replicas, and a connection to it.
type r3 struct {
	nodes []*server.Server
	nc    *nats.Conn
	js    jetstream.JetStream
	r     *chunklog.Reader
	// partitions is how many chunk streams Setup made: one per replica.
	partitions int
}

func startR3(t *testing.T) r3 {
	t.Helper()
	nodes := relaytest.Cluster(t, 3)
	nc, js := relaytest.Connect(t, nodes[0], streams.Topology{Replicas: 3})
	s, err := js.Stream(context.Background(), wire.ChunkStream)
	if err != nil {
		t.Fatal(err)
	}
	if !chunklog.Batches(s.CachedInfo().Config) {
		t.Fatalf("the chunk stream takes no batches: %+v", s.CachedInfo().Config)
	}
	partitions, err := streams.Partitions(context.Background(), js)
	if err != nil || partitions != 3 {
		t.Fatalf("partitions on three replicas: %d, %v", partitions, err)
	}
	return r3{nodes: nodes, nc: nc, js: js, r: chunklog.NewReader(nc, ""), partitions: partitions}
}

// opened is a writer whose stream, in partition 0, has its claim and
// first chunk, which go alone, so that its next appends go in batches.
func (c r3) opened(t *testing.T, ctx context.Context, commits *chunklog.Committer) (*chunklog.Writer, string) {
	return c.openedIn(t, ctx, commits, 0)
}

// openedIn is opened for a stream in partition k.
func (c r3) openedIn(t *testing.T, ctx context.Context, commits *chunklog.Committer, k int) (*chunklog.Writer, string) {
	t.Helper()
	id := wire.NewStreamIDIn(k)
	w := commits.NewWriter(c.js, c.r, id, 0, 0)
	for _, f := range []wire.Frame{{Kind: wire.KindClaim, Worker: "w1"}, {Kind: wire.KindChunk, Content: "0"}} {
		if _, err := appendR3(ctx, w, f); err != nil {
			t.Fatalf("open %s: %v", id, err)
		}
	}
	return w, id
}

// contents reads the chunks a stream holds, up to the last frame its
// leader holds: a direct get may reach a replica behind it.
func (c r3) contents(t *testing.T, ctx context.Context, id string) []string {
	t.Helper()
	last := c.last(t, ctx, id)
	var got []string
	relaytest.Eventually(t, 10*time.Second, time.Millisecond, func() bool {
		got = nil
		end, err := c.r.Read(ctx, id, 0, func(e chunklog.Entry) error {
			if e.Frame.Kind == wire.KindChunk {
				got = append(got, e.Frame.Content)
			}
			return nil
		})
		return err == nil && end == last
	})
	return got
}

// inOneBatch runs appendOne for 0 to n-1 at once, their appends (to
// streams in partition 0) held in commits until all n are queued, so that
// they go in one batch.
func inOneBatch(t *testing.T, commits *chunklog.Committer, n int, appendOne func(i int)) {
	t.Helper()
	release := chunklog.Hold(commits, 0)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { appendOne(i) })
	}
	relaytest.Eventually(t, 10*time.Second, time.Millisecond, func() bool { return chunklog.Queued(commits, 0) == n })
	release()
	wg.Wait()
}

// last is the JetStream sequence of the stream's last frame, from its
// leader: a direct get may reach a replica behind it.
func (c r3) last(t *testing.T, ctx context.Context, id string) uint64 {
	t.Helper()
	m, found, err := chunklog.LeaderGet(ctx, c.nc, "", wire.ChunkStreamOf(id), chunklog.LeaderQuery{LastFor: wire.ChunkSubject(id)})
	if err != nil || !found {
		t.Fatalf("last of %s: %v, found %v", id, err, found)
	}
	return m.Seq
}

// batched reports whether the leader of the stream's partition stored the
// message at seq as part of an atomic batch.
func (c r3) batched(t *testing.T, ctx context.Context, id string, seq uint64) bool {
	t.Helper()
	m, found, err := chunklog.LeaderGet(ctx, c.nc, "", wire.ChunkStreamOf(id), chunklog.LeaderQuery{Seq: seq})
	if err != nil || !found {
		t.Fatalf("leader get %d: %v, found %v", seq, err, found)
	}
	return m.Header.Get("Nats-Batch-Id") != ""
}

// Many streams appending at once, spread over the partitions, share
// batches, one lane of batches per partition: every frame is stored once,
// in its stream's order, at the sequence its cursor names, and most of
// them went in batches of several.
func TestCommitterGroupsTheAppendsOfManyStreams(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := startR3(t)
	commits := chunklog.NewCommitter(c.nc, nil, nil)
	const streamsN, frames = 40, 25
	ids := make([]string, streamsN)
	cursors := make([][]wire.Cursor, streamsN)
	var wg sync.WaitGroup
	for i := range streamsN {
		w, id := c.openedIn(t, ctx, commits, i%c.partitions)
		ids[i] = id
		wg.Go(func() {
			for n := 1; n <= frames; n++ {
				cur, err := w.Append(ctx, wire.Frame{Kind: wire.KindChunk, Content: fmt.Sprint(n)})
				if err != nil {
					t.Errorf("stream %d frame %d: %v", i, n, err)
					return
				}
				cursors[i] = append(cursors[i], cur)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	grouped := 0
	for i, id := range ids {
		want := []string{"0"}
		for n := 1; n <= frames; n++ {
			want = append(want, fmt.Sprint(n))
		}
		if got := c.contents(t, ctx, id); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("stream %d holds %q, want %q", i, got, want)
		}
		for n, cur := range cursors[i] {
			subject, f, err := c.r.At(ctx, id, cur.JSSeq)
			if err != nil || subject != wire.ChunkSubject(id) || f.Seq != cur.Seq || f.Content != fmt.Sprint(n+1) {
				t.Fatalf("stream %d cursor %+v: %q %+v, %v", i, cur, subject, f, err)
			}
			if c.batched(t, ctx, id, cur.JSSeq) {
				grouped++
			}
		}
	}
	t.Logf("%d of %d appends went in batches of several", grouped, streamsN*frames)
	if grouped < streamsN*frames/2 {
		t.Fatalf("only %d of %d appends went in batches", grouped, streamsN*frames)
	}
}

// A batch refused because one of its streams was taken over stores none
// of it; the taken stream's writer is fenced, and every other stream's
// frame is sent again and stored once.
func TestBatchRefusedForOneStreamStoresTheOthers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := startR3(t)
	commits := chunklog.NewCommitter(c.nc, nil, nil)
	const streamsN = 5
	writers := make([]*chunklog.Writer, streamsN)
	ids := make([]string, streamsN)
	for i := range streamsN {
		writers[i], ids[i] = c.opened(t, ctx, commits)
	}
	// Another worker takes stream 0 after its first chunk.
	last := c.last(t, ctx, ids[0])
	if _, err := appendR3(ctx, chunklog.NewWriter(c.js, c.r, ids[0], last, 1), wire.Frame{Kind: wire.KindClaim, Worker: "w2"}); err != nil {
		t.Fatal(err)
	}
	errs := make([]error, streamsN)
	inOneBatch(t, commits, streamsN, func(i int) {
		_, errs[i] = writers[i].Append(ctx, wire.Frame{Kind: wire.KindChunk, Content: "1"})
	})
	if !errors.Is(errs[0], chunklog.ErrFenced) {
		t.Fatalf("the taken stream's append: %v, want ErrFenced", errs[0])
	}
	if got := c.contents(t, ctx, ids[0]); fmt.Sprint(got) != "[0]" {
		t.Fatalf("the taken stream holds %q", got)
	}
	for i := 1; i < streamsN; i++ {
		if errs[i] != nil {
			t.Fatalf("stream %d: %v", i, errs[i])
		}
		if got := c.contents(t, ctx, ids[i]); fmt.Sprint(got) != "[0 1]" {
			t.Fatalf("stream %d holds %q, want [0 1]", i, got)
		}
	}
}

// A batch sent again after its ack was lost is refused for the frames it
// already stored; each writer finds its own frame there and goes on after
// it, and the frame is stored once.
func TestBatchAfterLostAckFindsItsOwnFrames(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := startR3(t)
	commits := chunklog.NewCommitter(c.nc, nil, nil)
	const streamsN = 4
	var lost, fresh []*chunklog.Writer
	var ids []string
	for range streamsN {
		w, id := c.opened(t, ctx, commits)
		last := c.last(t, ctx, id)
		// A copy of the writer, as it was before the lost batch.
		fresh = append(fresh, commits.NewWriter(c.js, c.r, id, last, 1))
		lost, ids = append(lost, w), append(ids, id)
	}
	one := wire.Frame{Kind: wire.KindChunk, Content: "1"}
	// The first batch: stored, its ack as good as lost (fresh never saw it).
	stored := make([]wire.Cursor, streamsN)
	inOneBatch(t, commits, streamsN, func(i int) {
		var err error
		if stored[i], err = lost[i].Append(ctx, one); err != nil {
			t.Errorf("first batch, stream %d: %v", i, err)
		}
	})
	// The same frames again, in one batch.
	again := make([]wire.Cursor, streamsN)
	errs := make([]error, streamsN)
	inOneBatch(t, commits, streamsN, func(i int) { again[i], errs[i] = fresh[i].Append(ctx, one) })
	for i, w := range fresh {
		if errs[i] != nil || again[i] != stored[i] {
			t.Fatalf("stream %d sent again: %+v, %v; want %+v", i, again[i], errs[i], stored[i])
		}
		if _, err := appendR3(ctx, w, wire.Frame{Kind: wire.KindChunk, Content: "2"}); err != nil {
			t.Fatalf("stream %d after: %v", i, err)
		}
		if got := c.contents(t, ctx, ids[i]); fmt.Sprint(got) != "[0 1 2]" {
			t.Fatalf("stream %d holds %q, want [0 1 2]", i, got)
		}
	}
}

// A takeover racing a batch that holds the old owner's frame: exactly one
// of the two is stored after the frame both chained on, and each writer
// is told the truth.
func TestTakeoverWhileTheBatchIsInFlight(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := startR3(t)
	commits := chunklog.NewCommitter(c.nc, nil, nil)
	const rounds = 20
	for round := range rounds {
		const streamsN = 4
		writers := make([]*chunklog.Writer, streamsN)
		ids := make([]string, streamsN)
		for i := range streamsN {
			writers[i], ids[i] = c.opened(t, ctx, commits)
		}
		last := c.last(t, ctx, ids[0])
		taker := chunklog.NewWriter(c.js, c.r, ids[0], last, 1)
		errs := make([]error, streamsN)
		var takeErr error
		var wg sync.WaitGroup
		for i, w := range writers {
			wg.Go(func() { _, errs[i] = w.Append(ctx, wire.Frame{Kind: wire.KindChunk, Content: "old"}) })
		}
		wg.Go(func() { _, takeErr = appendR3(ctx, taker, wire.Frame{Kind: wire.KindClaim, Worker: "w2"}) })
		wg.Wait()
		// A direct get may reach a replica that does not hold the winner's
		// frame yet; the leader's last frame says where the stream ends.
		var after []wire.Frame
		relaytest.Eventually(t, 10*time.Second, time.Millisecond, func() bool {
			after = nil
			end, err := c.r.Read(ctx, ids[0], last, func(e chunklog.Entry) error {
				after = append(after, e.Frame)
				return nil
			})
			m, found, lerr := chunklog.LeaderGet(ctx, c.nc, "", wire.ChunkStreamOf(ids[0]), chunklog.LeaderQuery{LastFor: wire.ChunkSubject(ids[0])})
			return err == nil && lerr == nil && found && end == m.Seq
		})
		oldWon := errs[0] == nil
		takerWon := takeErr == nil
		switch {
		case oldWon == takerWon:
			t.Fatalf("round %d: old owner %v, taker %v: exactly one may win", round, errs[0], takeErr)
		case oldWon && (len(after) != 1 || after[0].Content != "old"):
			t.Fatalf("round %d: the old owner won, the stream holds %+v after", round, after)
		case takerWon && (len(after) != 1 || after[0].Kind != wire.KindClaim):
			t.Fatalf("round %d: the taker won, the stream holds %+v after", round, after)
		case !oldWon && !errors.Is(errs[0], chunklog.ErrFenced):
			t.Fatalf("round %d: the old owner lost with %v, want ErrFenced", round, errs[0])
		}
		for i := 1; i < streamsN; i++ {
			if errs[i] != nil {
				t.Fatalf("round %d stream %d: %v", round, i, errs[i])
			}
		}
	}
}

// A batch whose commit never came (its worker was killed between its
// messages and the commit) stores nothing: the stream's next owner claims
// it after the last frame stored, and nothing of the batch appears.
func TestBatchWithoutCommitStoresNothing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := startR3(t)
	commits := chunklog.NewCommitter(c.nc, nil, nil)
	_, id := c.opened(t, ctx, commits)
	last := c.last(t, ctx, id)
	dying, err := nats.Connect(c.nodes[0].ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	for n := 1; n <= 3; n++ {
		if err := dying.PublishMsg(chunklog.BatchMsg(wire.ChunkSubject(id), []byte(fmt.Sprint("lost ", n)), last, "dying", n)); err != nil {
			t.Fatal(err)
		}
	}
	if err := dying.Flush(); err != nil {
		t.Fatal(err)
	}
	dying.Close()
	next := commits.NewWriter(c.js, c.r, id, last, 1)
	if _, err := appendR3(ctx, next, wire.Frame{Kind: wire.KindClaim, Worker: "w2"}); err != nil {
		t.Fatalf("the next owner's claim: %v", err)
	}
	if _, err := appendR3(ctx, next, wire.Frame{Kind: wire.KindChunk, Content: "1"}); err != nil {
		t.Fatalf("the next owner's chunk: %v", err)
	}
	if got := c.contents(t, ctx, id); fmt.Sprint(got) != "[0 1]" {
		t.Fatalf("stream holds %q, want [0 1]", got)
	}
}

// A server that refuses a batch as one (here: atomic publishing turned
// off on the stream) has the appends sent alone, and every one is stored.
func TestBatchRefusedAsABatchGoesAlone(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := startR3(t)
	commits := chunklog.NewCommitter(c.nc, nil, nil)
	const streamsN = 4
	writers := make([]*chunklog.Writer, streamsN)
	ids := make([]string, streamsN)
	for i := range streamsN {
		writers[i], ids[i] = c.opened(t, ctx, commits)
	}
	s, err := c.js.Stream(ctx, wire.ChunkStream)
	if err != nil {
		t.Fatal(err)
	}
	cfg := s.CachedInfo().Config
	cfg.AllowAtomicPublish = false
	if _, err := c.js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	for n := 1; n <= 3; n++ {
		errs := make([]error, streamsN)
		inOneBatch(t, commits, streamsN, func(i int) {
			_, errs[i] = writers[i].Append(ctx, wire.Frame{Kind: wire.KindChunk, Content: fmt.Sprint(n)})
		})
		for i, err := range errs {
			if err != nil {
				t.Fatalf("append %d, stream %d: %v", n, i, err)
			}
		}
	}
	for i, id := range ids {
		if got := c.contents(t, ctx, id); fmt.Sprint(got) != "[0 1 2 3]" {
			t.Fatalf("stream %d holds %q, want [0 1 2 3]", i, got)
		}
	}
}
