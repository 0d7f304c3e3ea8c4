package chat

import (
	"testing"

	"github.com/relaydev/relay/relay/wire"
)

// TestAnswerIsOneCompletion: chunks become one message, tool calls merged
// by index whatever order their fragments came in, and a cut answer has
// no finish reason but the error that cut it.
func TestAnswerIsOneCompletion(t *testing.T) {
	var a Answer
	for _, f := range []wire.Frame{
		{Kind: wire.KindChunk, Seq: 1, Role: "assistant", Provider: "p", Model: "m-1", SystemFingerprint: "fp",
			ToolCalls: []byte(`[{"index":1,"id":"call_b","type":"function","function":{"name":"put","arguments":"{\"k\""}},{"index":0,"id":"call_a","type":"function","function":{"name":"get","arguments":""}}]`)},
		{Kind: wire.KindChunk, Seq: 2, Content: "so", Reasoning: "hm", ToolCalls: []byte(`[{"index":0,"function":{"arguments":"{}"}},{"index":1,"function":{"arguments":":1}"}}]`)},
	} {
		if err := a.Add(f); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Add(wire.Frame{Kind: wire.KindChunk, Seq: 3, ToolCalls: []byte(`{}`)}); err == nil {
		t.Error("tool calls that are no array were added")
	}
	s := Stream{ID: "s1", Meta: wire.Meta{Model: "m", Created: 7}, Cursors: testCursors}
	done := wire.Frame{Kind: wire.KindEnd, Seq: 4, Status: wire.StatusDone, FinishReason: "tool_calls", Attempts: 1}
	c := a.Completion(s, wire.Cursor{Seq: 4, JSSeq: 9}, &done)
	msg := c.Choices[0].Message
	if c.ID != "chatcmpl-s1" || c.Model != "m-1" || c.SystemFingerprint != "fp" || *c.Choices[0].FinishReason != "tool_calls" || c.Error != nil ||
		*msg.Content != "so" || msg.Reasoning != "hm" || len(msg.ToolCalls) != 2 ||
		msg.ToolCalls[0].ID != "call_a" || msg.ToolCalls[0].Function.Arguments != "{}" ||
		msg.ToolCalls[1].Function.Name != "put" || msg.ToolCalls[1].Function.Arguments != `{"k":1}` ||
		c.Relay.Cursor != testCursors.String(wire.Cursor{Seq: 4, JSSeq: 9}) || c.Relay.Provider != "p" || c.Relay.RequestedModel != "" {
		t.Fatalf("completion %+v", c)
	}
	cut := wire.Frame{Kind: wire.KindEnd, Seq: 4, Status: wire.StatusIncomplete}
	c = a.Completion(s, wire.Cursor{Seq: 4, JSSeq: 9}, &cut)
	if c.Choices[0].FinishReason != nil || c.Error == nil || c.Error.Code != "incomplete" || c.Relay.Status != wire.StatusIncomplete {
		t.Fatalf("cut completion %+v", c)
	}
}
