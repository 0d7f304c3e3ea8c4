package edge

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/relay/chunklog"
	"github.com/relaydev/relay/relay/wire"
)

// tailReader reads the last frame stored for a stream with one direct get.
// The stream handle is bound on first use, like metaStore's bucket.
type tailReader struct {
	js     jetstream.JetStream
	mu     sync.Mutex
	stream jetstream.Stream
}

// last returns the last frame stored for stream id, or the zero Entry when
// there is none.
func (t *tailReader) last(ctx context.Context, id string) (chunklog.Entry, error) {
	t.mu.Lock()
	if t.stream == nil {
		stream, err := t.js.Stream(ctx, wire.ChunkStream)
		if err != nil {
			t.mu.Unlock()
			return chunklog.Entry{}, fmt.Errorf("edge: stream %s: %w", wire.ChunkStream, err)
		}
		t.stream = stream
	}
	stream := t.stream
	t.mu.Unlock()
	msg, err := stream.GetLastMsgForSubject(ctx, wire.ChunkSubject(id))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return chunklog.Entry{}, nil
	}
	if err != nil {
		return chunklog.Entry{}, fmt.Errorf("edge: last frame of %s: %w", id, err)
	}
	frame, err := wire.DecodeFrame(msg.Data)
	if err != nil {
		return chunklog.Entry{}, err
	}
	return chunklog.Entry{JSSeq: msg.Sequence, Frame: frame}, nil
}
