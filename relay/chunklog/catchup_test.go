package chunklog_test

import (
	"context"
	"encoding/json"
	"slices"
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

// The first read of a resume takes its frame with one plain get, and a
// read that goes on (ReadOn) sends batched gets only, where ReadUpTo
// starts with plain ones.
func TestReadOnPagesAtOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s := relaytest.NATS(t)
	nc, js := relaytest.Connect(t, s, streams.Topology{})
	const n = 600
	id := longStream(ctx, t, js, n, 10, 1)
	sent := directGets(t, s)
	r := chunklog.NewReader(nc, "")
	var seqs []uint64
	collect := func(e chunklog.Entry) error {
		seqs = append(seqs, e.Frame.Seq)
		return nil
	}
	read := func(what string, fn func(context.Context, string, uint64, int, func(chunklog.Entry) error) (uint64, error), after uint64, limit int, want []int) uint64 {
		t.Helper()
		last, err := fn(ctx, id, after, limit, collect)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got := batches(sent()); !slices.Equal(got, want) {
			t.Fatalf("%s sent gets of batches %v, want %v (0: a plain get)", what, got, want)
		}
		return last
	}

	first := read("ReadUpTo 1", r.ReadUpTo, 0, 1, []int{0})
	if !slices.Equal(seqs, []uint64{1}) {
		t.Fatalf("first read: frames %v, want [1]", seqs)
	}
	// The last frame (a plain get), whose chain breaks at once (these
	// frames are not chained), then forward: 16 plain gets (chained) and a
	// batch for the rest.
	read("ReadUpTo 256", r.ReadUpTo, first, 256, append(slices.Repeat([]int{0}, 1+16), 240))
	seqs = seqs[:1]
	after := read("ReadOn 256", r.ReadOn, first, 256, []int{256})
	// 343 frames left: a page and the rest.
	read("ReadOn", r.ReadOn, after, 0, []int{256, 256})
	if len(seqs) != n {
		t.Fatalf("read %d frames, want %d", len(seqs), n)
	}
	for i, seq := range seqs {
		if seq != uint64(i+1) {
			t.Fatalf("frame %d has seq %d", i, seq)
		}
	}
}

// catchUpLimit is the most frames one read of the edge's catch-up asks
// for by default: max(client_buffer, 64) with client_buffer 256.
const catchUpLimit = 256

// BenchmarkCatchUp times a client's catch-up through a 2,000-frame stream
// interleaved with 1,000 other streams (10 of their frames after each of
// its frames, 20 frames each, as in e2e/bench's resume), read from the
// start as the edge's follower reads it, and reports the requests sent.
// prefix is how the follower read before ReadOn: ReadUpTo every time.
func BenchmarkCatchUp(b *testing.B) {
	ctx := context.Background()
	s := relaytest.NATS(b)
	_, js := relaytest.Connect(b, s, streams.Topology{})
	const frames = 2000
	id := longStream(ctx, b, js, frames, 1000, 10)
	nc, _ := relaytest.Connect(b, s, streams.Topology{})
	r := chunklog.NewReader(nc, "")
	for _, mode := range []string{"prefix", "paged"} {
		b.Run(mode, func(b *testing.B) {
			sent, catchUps := nc.Stats().OutMsgs, 0
			for b.Loop() {
				if n, err := catchUp(ctx, r, id, mode == "paged"); err != nil || n != frames {
					b.Fatalf("caught up with %d frames, %v", n, err)
				}
				catchUps++
			}
			b.ReportMetric(float64(nc.Stats().OutMsgs-sent)/float64(catchUps), "requests/op")
		})
	}
}

// catchUp reads a stream from the start as the edge's follower does: the
// first frame alone, then catchUpLimit frames a read; when paged, a read
// after one that stopped at 64 frames or more goes on with ReadOn. It
// returns how many frames it read.
func catchUp(ctx context.Context, r *chunklog.Reader, id string, paged bool) (int, error) {
	var after uint64
	total, want, readOn := 0, 1, false
	for {
		read := r.ReadUpTo
		if readOn {
			read = r.ReadOn
		}
		n := 0
		last, err := read(ctx, id, after, want, func(chunklog.Entry) error { n++; return nil })
		if err != nil {
			return total, err
		}
		total, after = total+n, last
		if n < want {
			return total, nil
		}
		readOn = paged && want >= 64
		want = catchUpLimit
	}
}

// longStream stores a new stream of frames chunks, each followed by
// perFrame frames of others other streams, taken in turn, and returns its
// id. It publishes asynchronously, for speed: the frames are not chained
// as a Writer's are, so reads of them go forward, as these tests and
// benchmarks mean them to.
func longStream(ctx context.Context, tb testing.TB, js jetstream.JetStream, frames, others, perFrame int) string {
	tb.Helper()
	id := wire.NewStreamID()
	ids := make([]string, others)
	for i := range ids {
		ids[i] = wire.NewStreamID()
	}
	publish := func(id string, seq uint64) {
		f := wire.Frame{Kind: wire.KindChunk, Seq: seq, Content: "a token or two"}
		if _, err := js.PublishAsync(wire.ChunkSubject(id), f.Encode()); err != nil {
			tb.Fatal(err)
		}
	}
	other := 0
	for i := 1; i <= frames; i++ {
		publish(id, uint64(i))
		for range perFrame {
			publish(ids[other%others], uint64(other/others+1))
			other++
		}
		if i%100 == 0 || i == frames {
			select {
			case <-js.PublishAsyncComplete():
			case <-ctx.Done():
				tb.Fatal(ctx.Err())
			}
		}
	}
	return id
}

// getRequest is a direct get as the server receives it.
type getRequest struct {
	Batch int `json:"batch"`
	// Next is the subject of a get of the next message after a sequence:
	// the server walks the messages in between to find it.
	Next string `json:"next_by_subj"`
	// Last is the subject of a get of its last message.
	Last string `json:"last_by_subj"`
}

// directGets subscribes, on a connection of its own, to the direct gets
// sent to the chunk stream, and returns a function that lists those sent
// since it was last called (when their replies came).
func directGets(tb testing.TB, s *server.Server) func() []getRequest {
	tb.Helper()
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(nc.Close)
	sub, err := nc.SubscribeSync("$JS.API.DIRECT.GET." + wire.ChunkStream)
	if err != nil {
		tb.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		tb.Fatal(err)
	}
	return func() []getRequest {
		tb.Helper()
		// The server passed each request on before it answered it, and
		// passes on this connection's PING after them.
		if err := nc.Flush(); err != nil {
			tb.Fatal(err)
		}
		pending, _, err := sub.Pending()
		if err != nil {
			tb.Fatal(err)
		}
		reqs := []getRequest{}
		for range pending {
			msg, err := sub.NextMsg(time.Second)
			if err != nil {
				tb.Fatal(err)
			}
			var req getRequest
			if err := json.Unmarshal(msg.Data, &req); err != nil {
				tb.Fatal(err)
			}
			reqs = append(reqs, req)
		}
		return reqs
	}
}

// batches lists each request's batch size, 0 for a plain get.
func batches(reqs []getRequest) []int {
	out := make([]int, len(reqs))
	for i, r := range reqs {
		out[i] = r.Batch
	}
	return out
}
