package chat

import (
	"testing"

	"github.com/relaydev/relay/relay/wire"
)

// benchFrames are a typical stream's frames and their cursors: a first
// chunk with the role, a token, and the done end frame with its usage.
func benchFrames() (Stream, []wire.Cursor, []wire.Frame) {
	s := Stream{ID: "sbm6v2c4x3qjz7f5k1n8r9t0wa", Meta: wire.Meta{Model: "gpt-4o-mini", Created: 1764633600}, Cursors: testCursors}
	chunk := wire.Frame{Kind: wire.KindChunk, Seq: 2, Content: " world", Provider: "openai", Model: "gpt-4o-mini-2024-07-18", Attempt: 1}
	first := chunk
	first.Seq, first.Role, first.Content = 1, "assistant", "Hello"
	end := wire.Frame{Kind: wire.KindEnd, Seq: 3, Status: wire.StatusDone, FinishReason: "stop", Attempts: 1, Cost: 0.000042,
		Usage: &wire.Usage{PromptTokens: 12, CompletionTokens: 2, TotalTokens: 14}}
	return s, []wire.Cursor{{Seq: 1, JSSeq: 101}, {Seq: 2, JSSeq: 102}, {Seq: 3, JSSeq: 103}}, []wire.Frame{first, chunk, end}
}

// BenchmarkRenderChunk renders one chunk (and the done stream's last one)
// with encoding/json, as the edge did, and by hand, into a reused buffer
// as the edge's SSE writer hands it over.
func BenchmarkRenderChunk(b *testing.B) {
	s, cursors, frames := benchFrames()
	for _, c := range []struct {
		name string
		i    int
	}{{"chunk", 1}, {"final", 2}} {
		f := &frames[c.i]
		b.Run(c.name+"/encoding-json", func(b *testing.B) {
			b.ReportAllocs()
			var buf []byte
			for b.Loop() {
				buf = append(buf[:0], marshal(s.object(cursors[c.i], f))...)
			}
		})
		b.Run(c.name+"/appender", func(b *testing.B) {
			b.ReportAllocs()
			var buf []byte
			for b.Loop() {
				buf = s.AppendObject(buf[:0], cursors[c.i], f)
			}
		})
	}
}

// TestRenderChunkAllocatesNothing: the common chunks are rendered without
// an allocation of their own, as the edge renders every token's event
// straight into its batch.
func TestRenderChunkAllocatesNothing(t *testing.T) {
	s, cursors, frames := benchFrames()
	buf := make([]byte, 0, 1<<10)
	for i := range frames {
		if n := testing.AllocsPerRun(100, func() { buf = s.AppendObject(buf[:0], cursors[i], &frames[i]) }); n != 0 {
			t.Errorf("frame %d: %v allocations, want none", i, n)
		}
	}
}
