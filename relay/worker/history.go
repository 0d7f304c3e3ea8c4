package worker

import (
	"context"
	"strings"
	"time"

	"github.com/relaydev/relay/relay/chunklog"
	"github.com/relaydev/relay/relay/wire"
)

// history is what a stream's stored frames say when a job starts: whether
// it already ended, where a writer must chain on, and what earlier owners
// published, which a takeover continues.
type history struct {
	ended bool
	// end is the end frame, if ended.
	end wire.Frame
	// last is the JetStream sequence of the last frame (0: no frames);
	// seq is the per-stream sequence of the last chunk.
	last, seq uint64
	// text is the content published so far, in order.
	text string
	// toolCalls reports that some chunk carried tool calls, which a prefill
	// continuation cannot continue.
	toolCalls bool
	// attempts is the highest attempt number on a chunk.
	attempts int
	// tokens sums the chunks' token counts.
	tokens int
}

// historyTimeout bounds reading a stream's frames: a read that hangs would
// keep the request with this worker forever, as progress is still reported.
const historyTimeout = 10 * time.Second

// readHistory reads every frame stored for the stream.
func readHistory(ctx context.Context, r *chunklog.Reader, streamID string) (history, error) {
	ctx, cancel := context.WithTimeout(ctx, historyTimeout)
	defer cancel()
	var h history
	var text strings.Builder
	last, err := r.Read(ctx, streamID, 0, func(e chunklog.Entry) error {
		switch f := e.Frame; f.Kind {
		case wire.KindEnd:
			h.ended, h.end = true, f
		case wire.KindChunk:
			h.seq = f.Seq
			text.WriteString(f.Content)
			h.toolCalls = h.toolCalls || len(f.ToolCalls) > 0
			h.attempts = max(h.attempts, f.Attempt)
			h.tokens += f.Tokens
		}
		return nil
	})
	if err != nil {
		return history{}, err
	}
	h.last, h.text = last, text.String()
	return h, nil
}
