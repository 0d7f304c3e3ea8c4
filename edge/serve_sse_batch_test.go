package edge

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/relaydev/relay/edge/follow"
	"github.com/relaydev/relay/relay/chunklog"
	"github.com/relaydev/relay/relay/dialect/chat"
	"github.com/relaydev/relay/relay/metrics"
	"github.com/relaydev/relay/relay/wire"
)

// recordingSink keeps each batch written to it.
type recordingSink struct{ batches []string }

func (r *recordingSink) write(p []byte) error {
	r.batches = append(r.batches, string(p))
	return nil
}

// arrivingEvents is chatEvents whose rendering of a frame has the next
// live frame of frames arrive, as one would while a batch is rendered.
type arrivingEvents struct {
	chatEvents
	t      *testing.T
	nc     *nats.Conn
	f      *follow.Follower
	frames []wire.Frame
}

func (a *arrivingEvents) frame(out *sseWriter, e chunklog.Entry) {
	a.chatEvents.frame(out, e)
	if next := int(e.Frame.Seq); next < len(a.frames) {
		arrive(a.t, a.nc, a.f, a.s.ID, a.frames, next)
	}
}

// numbered is the frames of s, numbered from 1 as a worker stores them.
func numbered(s script) []wire.Frame {
	frames := s(wire.Request{})
	for i := range frames {
		frames[i].Seq = uint64(i + 1)
	}
	return frames
}

// arrive publishes frames[i] of stream id live as RELAY_CHUNKS republishes
// it, stored at JetStream sequence i+1 right after the one before, and
// waits until f, in the live phase, has it ready.
func arrive(t *testing.T, nc *nats.Conn, f *follow.Follower, id string, frames []wire.Frame, i int) {
	t.Helper()
	err := nc.PublishMsg(&nats.Msg{
		Subject: wire.LiveSubject(id),
		Header:  nats.Header{wire.HeaderSequence: {strconv.Itoa(i + 1)}, wire.HeaderLastSequence: {strconv.Itoa(i)}},
		Data:    frames[i].Encode(),
	})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, f.Ready)
}

// batchStream is an SSE response of stream id in dialect d, read from f,
// written to a recordingSink. f's live subscription is on the server
// before it returns, so that frames published after it reach f.
func batchStream(t *testing.T, edge *testEdge, id string, f *follow.Follower, d eventDialect) (*sseStream, *recordingSink) {
	if err := edge.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	sink := &recordingSink{}
	ss := edge.obs.session(chat.Stream{ID: id}, wire.Cursor{}, metrics.TransportSSE, false, time.Now())
	t.Cleanup(ss.close)
	st := &sseStream{s: edge.Server, id: id, d: d, f: f, sess: ss, ctx: t.Context(), gone: func() bool { return false }}
	st.out.dst = sink
	return st, sink
}

func TestSSEWritesFramesReadyMeanwhileInOneBatch(t *testing.T) {
	e := newEnv(t)
	edge := e.startEdge(Config{})
	frames := numbered(answer(3))
	id := wire.NewStreamID()
	f, err := edge.hub.FollowNew(context.Background(), id, 8)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, sink := batchStream(t, edge, id, f, &arrivingEvents{chatEvents: chatEvents{s: chat.Stream{ID: id, Cursors: fixedCursorKey}}, t: t, nc: e.nc, f: f, frames: frames})

	arrive(t, e.nc, f, id, frames, 0)
	entries, ok, err := f.Poll(t.Context())
	if !ok || err != nil || len(entries) != 1 {
		t.Fatalf("poll: %d frames, %v, %v", len(entries), ok, err)
	}
	if over, left := st.step(entries, err); !over || left {
		t.Fatalf("step: over %v, left %v; want the stream over", over, left)
	}
	if len(sink.batches) != 1 {
		t.Fatalf("%d writes, want the 3 chunks, the end and [DONE] in one:\n%q", len(sink.batches), sink.batches)
	}
	var ids []string
	for _, ev := range parseSSE(t, sink.batches[0]) {
		ids = append(ids, ev.ID)
	}
	var want string
	for i := range uint64(4) {
		want += fixedCursorKey.String(wire.Cursor{Seq: i + 1, JSSeq: i + 1}) + " "
	}
	if got := strings.Join(ids, " "); got != want {
		t.Errorf("event ids %q, want the 4 frames' cursors and [DONE] without one", got)
	}
	if !strings.HasSuffix(sink.batches[0], "data: [DONE]\n\n") {
		t.Errorf("the batch does not end with [DONE]: %q", sink.batches[0])
	}
}

func TestSSEWritesAReadyFrameWithoutWaitingForMore(t *testing.T) {
	e := newEnv(t)
	edge := e.startEdge(Config{})
	frames := numbered(answer(2))
	id := wire.NewStreamID()
	f, err := edge.hub.FollowNew(context.Background(), id, 8)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, sink := batchStream(t, edge, id, f, &chatEvents{s: chat.Stream{ID: id, Cursors: fixedCursorKey}})

	for i := range frames {
		arrive(t, e.nc, f, id, frames, i)
		entries, ok, err := f.Poll(t.Context())
		if !ok || err != nil || len(entries) != 1 {
			t.Fatalf("poll %d: %d frames, %v, %v", i, len(entries), ok, err)
		}
		over, _ := st.step(entries, err)
		if len(sink.batches) != i+1 || over != (i == len(frames)-1) {
			t.Fatalf("after frame %d: %d writes, over %v; want each frame written as it came", i+1, len(sink.batches), over)
		}
	}
}
