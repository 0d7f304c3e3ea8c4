package responses

import (
	"encoding/json"
	"testing"

	"github.com/relaydev/relay/relay/dialect/chat"
	"github.com/relaydev/relay/relay/wire"
)

// Folding writes the deltas of one part that follow each other as one,
// numbered as the last; every other event is written as it is, and after
// Unfold deltas are written one each again.
func TestFold(t *testing.T) {
	frames := []wire.Frame{
		{Kind: wire.KindChunk, Reasoning: "a"}, {Kind: wire.KindChunk, Reasoning: "b"},
		{Kind: wire.KindChunk, Content: "Hel"}, {Kind: wire.KindChunk, Content: "lo"},
		{Kind: wire.KindChunk, ToolCalls: chat.ToolFragment(0, "c1", "f", `{"x"`)},
		{Kind: wire.KindChunk, ToolCalls: chat.ToolFragment(0, "", "", `:1`)},
	}
	_, all := renderFrames(append(frames, wire.Frame{Kind: wire.KindChunk, ToolCalls: chat.ToolFragment(0, "", "", `}`)}), -1)

	var out recorder
	r := NewRenderer(Stream{ID: testStream, Model: "m", Created: 1700000000}, -1)
	r.Begin(&out)
	r.Fold()
	for _, f := range frames {
		r.Frame(&out, f)
	}
	r.Unfold(&out)
	r.Frame(&out, wire.Frame{Kind: wire.KindChunk, ToolCalls: chat.ToolFragment(0, "", "", `}`)})

	type ev struct {
		Type  string `json:"type"`
		Seq   int    `json:"sequence_number"`
		Delta string `json:"delta"`
	}
	var got []ev
	for _, e := range out {
		var v ev
		if err := json.Unmarshal(e.data, &v); err != nil || v.Type != e.event {
			t.Fatalf("event %s %s", e.event, e.data)
		}
		got = append(got, v)
	}
	want := []ev{
		{"response.created", 0, ""}, {"response.in_progress", 1, ""},
		{"response.output_item.added", 2, ""}, {"response.content_part.added", 3, ""},
		{"response.reasoning_text.delta", 5, "ab"},
		{"response.reasoning_text.done", 6, ""}, {"response.content_part.done", 7, ""}, {"response.output_item.done", 8, ""},
		{"response.output_item.added", 9, ""}, {"response.content_part.added", 10, ""},
		{"response.output_text.delta", 12, "Hello"},
		{"response.output_text.done", 13, ""}, {"response.content_part.done", 14, ""}, {"response.output_item.done", 15, ""},
		{"response.output_item.added", 16, ""},
		{"response.function_call_arguments.delta", 18, `{"x":1`},
		{"response.function_call_arguments.delta", 19, `}`},
	}
	if len(got) != len(want) {
		t.Fatalf("%d events: %+v", len(got), got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("event %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	if len(all) != 20 {
		t.Fatalf("the stream has %d events, want 20", len(all))
	}
}
