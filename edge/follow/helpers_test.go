package follow

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/relay/chunklog"
	"github.com/relaydev/relay/relay/relaytest"
	"github.com/relaydev/relay/relay/streams"
	"github.com/relaydev/relay/relay/wire"
)

// logEnv is an embedded NATS with the relay's streams: a hub on a
// connection of its own, as an edge has one, and a worker's connection to
// write streams with.
type logEnv struct {
	t   *testing.T
	js  jetstream.JetStream
	hub *Hub
}

func newLogEnv(t *testing.T) *logEnv {
	t.Helper()
	srv := relaytest.NATS(t)
	_, js := relaytest.Connect(t, srv, streams.Topology{MemoryStorage: true})
	nc, hjs := relaytest.Connect(t, srv, streams.Topology{MemoryStorage: true})
	return &logEnv{t: t, js: js, hub: New(nc, chunklog.NewReader(nc, ""), hjs.Conn() == nc, relaytest.Logger(t))}
}

// write stores a claim, then frames, in stream id, as a worker does, and
// returns the frames' cursors.
func (e *logEnv) write(id string, frames []wire.Frame) []wire.Cursor {
	e.t.Helper()
	ctx := context.Background()
	w := chunklog.NewWriter(e.js, chunklog.NewReader(e.js.Conn(), ""), id, 0, 0)
	claim := wire.Frame{Kind: wire.KindClaim, Worker: "test"}
	var cursors []wire.Cursor
	for _, f := range append([]wire.Frame{claim}, frames...) {
		c, err := w.Append(ctx, f)
		if err != nil {
			e.t.Fatal(err)
		}
		cursors = append(cursors, c)
	}
	return cursors[1:]
}

// answer is n chunks and the end frame of a finished generation.
func answer(n int) []wire.Frame {
	var frames []wire.Frame
	for i := 1; i <= n; i++ {
		frames = append(frames, wire.Frame{Kind: wire.KindChunk, Content: fmt.Sprintf("w%d ", i)})
	}
	return append(frames, wire.Frame{Kind: wire.KindEnd, Status: wire.StatusDone})
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	relaytest.Eventually(t, 10*time.Second, 5*time.Millisecond, cond)
}
