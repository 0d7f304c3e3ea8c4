package anthropic

import (
	"strings"
	"testing"

	"github.com/relaydev/relay/relay/dialect/chat"
	"github.com/relaydev/relay/relay/wire"
)

// Folding writes the deltas of one block that follow each other as one,
// with the id of the last; a signature is not folded, and after Unfold
// deltas are written one each again.
func TestFold(t *testing.T) {
	var out recorder
	m := NewEvents("s1", "m", 1)
	m.Begin(&out)
	m.Fold()
	for _, f := range []wire.Frame{
		{Kind: wire.KindChunk, Reasoning: "a"}, {Kind: wire.KindChunk, Reasoning: "b"},
		{Kind: wire.KindChunk, ReasoningSignature: "sig"},
		{Kind: wire.KindChunk, Content: "Hel"}, {Kind: wire.KindChunk, Content: "lo"},
		{Kind: wire.KindChunk, ToolCalls: chat.ToolFragment(0, "c1", "f", `{"x"`)},
		{Kind: wire.KindChunk, ToolCalls: chat.ToolFragment(0, "", "", `:1`)},
	} {
		m.Chunk(&out, f)
	}
	m.Unfold(&out)
	m.Chunk(&out, wire.Frame{Kind: wire.KindChunk, ToolCalls: chat.ToolFragment(0, "", "", `}`)})
	want := []string{
		// 0 message_start and 1 content_block_start are the client's.
		`3 content_block_delta {"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"ab"}}`,
		`4 content_block_delta {"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"sig"}}`,
		`5 content_block_stop {"type":"content_block_stop","index":0}`,
		`6 content_block_start {"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}`,
		`8 content_block_delta {"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Hello"}}`,
		`9 content_block_stop {"type":"content_block_stop","index":1}`,
		`10 content_block_start {"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"c1","name":"f","input":{}}}`,
		`12 content_block_delta {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"x\":1"}}`,
		`13 content_block_delta {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"}"}}`,
	}
	if got := strings.Join(out, "\n"); got != strings.Join(want, "\n") {
		t.Fatalf("events\n%s\nwant\n%s", got, strings.Join(want, "\n"))
	}
}
