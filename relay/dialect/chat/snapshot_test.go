package chat

import (
	"encoding/json"
	"testing"

	"github.com/relaydev/relay/relay/wire"
)

// A snapshot chunk has everything its chunks said, tool calls with their
// arguments so far, and the place of the last chunk.
func TestSnapshotChunk(t *testing.T) {
	s := Stream{ID: "sabcdefghijklmnopqrstuvwxyz", Meta: wire.Meta{Model: "m", Created: 1}, Cursors: testCursors}
	var p Snapshot
	if !p.Empty() {
		t.Fatal("a new snapshot is not empty")
	}
	frames := []wire.Frame{
		{Kind: wire.KindChunk, Seq: 2, Role: "assistant", Reasoning: "hm", Provider: "alpha", Model: "m1", Attempt: 1},
		{Kind: wire.KindChunk, Seq: 3, Content: "Hi", ToolCalls: ToolFragment(1, "c1", "f", `{"a"`), Provider: "alpha", Model: "m1", Attempt: 1},
		{Kind: wire.KindChunk, Seq: 4, Content: "!", ToolCalls: ToolFragment(1, "", "", `:2`), Provider: "beta", Model: "m2", Attempt: 2},
	}
	for i, f := range frames {
		p.Add(wire.Cursor{Seq: f.Seq, JSSeq: uint64(10 + i)}, f)
	}
	got := string(marshal(s.SnapshotChunk(&p)))
	want := `{"id":"chatcmpl-sabcdefghijklmnopqrstuvwxyz","object":"chat.completion.chunk","created":1,"model":"m2",` +
		`"choices":[{"index":0,"delta":{"role":"assistant","content":"Hi!","reasoning_content":"hm",` +
		`"tool_calls":[{"index":1,"id":"c1","type":"function","function":{"name":"f","arguments":"{\"a\":2"}}]},"finish_reason":null}],` +
		`"relay":{"stream_id":"sabcdefghijklmnopqrstuvwxyz","seq":4,"cursor":"` + testCursors.String(wire.Cursor{Seq: 4, JSSeq: 12}) +
		`","provider":"beta","model":"m2","requested_model":"m","attempt":2,"snapshot":true,"chunks":3}}`
	if got != want {
		t.Fatalf("snapshot\n%s\nwant\n%s", got, want)
	}
	if !json.Valid([]byte(got)) || p.At() != (wire.Cursor{Seq: 4, JSSeq: 12}) {
		t.Fatalf("at %v", p.At())
	}
}
