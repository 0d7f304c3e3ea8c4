package anthropic

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/relaydev/relay/relay/wire"
)

// recorder is an EventWriter that keeps what it is given.
type recorder []string

func (r *recorder) Event(id, event string, data []byte) {
	*r = append(*r, fmt.Sprintf("%s %s %s", id, event, data))
}

// render renders frames as a stream that asked for model m, writing the
// events after number after.
func render(frames []wire.Frame, after int) (*Events, recorder) {
	var out recorder
	m := NewEvents("s1", "m", after)
	m.Begin(&out)
	for _, f := range frames {
		if f.Kind == wire.KindEnd {
			m.End(&out, f, &wire.Error{Message: "cut", Status: 503})
			continue
		}
		m.Chunk(&out, f)
	}
	return m, out
}

// TestEventsAfter: events are numbered from 0 in the order they are
// rendered, so rendering the stream again after event N writes exactly
// the events after N.
func TestEventsAfter(t *testing.T) {
	frames := []wire.Frame{
		{Kind: wire.KindChunk, Reasoning: "Think.", Model: "m"},
		{Kind: wire.KindChunk, Content: "Hel", Model: "m"},
		{Kind: wire.KindChunk, Content: "lo", Model: "m2", ToolCalls: []byte(`[{"index":0,"function":{"name":"f","arguments":"{}"}}]`)},
		{Kind: wire.KindEnd, Status: wire.StatusDone, FinishReason: "tool_calls"},
	}
	_, all := render(frames, -1)
	for i, ev := range all {
		if !strings.HasPrefix(ev, fmt.Sprint(i)+" ") {
			t.Fatalf("event %d is %s", i, ev)
		}
	}
	for after := range len(all) {
		if _, got := render(frames, after); !slices.Equal(got, all[after+1:]) {
			t.Errorf("after %d:\n%q\nwant\n%q", after, got, all[after+1:])
		}
	}
}

// TestEventsMessageOfACutStream: a stream that did not end done has no
// stop reason, its error, and the model that answered with the one asked
// for.
func TestEventsMessageOfACutStream(t *testing.T) {
	m, out := render([]wire.Frame{
		{Kind: wire.KindChunk, Content: "partial", Model: "m2"},
		{Kind: wire.KindEnd, Status: wire.StatusIncomplete},
	}, -1)
	got, _ := json.Marshal(m.Message())
	want := `{"id":"msg_s1","type":"message","role":"assistant","model":"m2","content":[{"type":"text","text":"partial"}],"stop_reason":null,"stop_sequence":null,` +
		`"usage":{"input_tokens":0,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":0},"error":{"type":"overloaded_error","message":"cut"},"relay":{"requested_model":"m"}}`
	if string(got) != want {
		t.Errorf("Message\n %s\nwant\n %s", got, want)
	}
	if last := out[len(out)-1]; last != `3 error {"type":"error","error":{"type":"overloaded_error","message":"cut"}}` {
		t.Errorf("last event %s", last)
	}
}

// TestEventsThinkingCutAtASeam: the thinking of an attempt cut before its
// signature stays an unsigned block of its own; the next attempt's
// thinking is another block, signed by its own signature.
func TestEventsThinkingCutAtASeam(t *testing.T) {
	m, _ := render([]wire.Frame{
		{Kind: wire.KindChunk, Role: "assistant", Reasoning: "Cut ", Provider: "claude", Model: "m", Attempt: 1},
		{Kind: wire.KindChunk, Reasoning: "Anew.", ReasoningSignature: "sig2", Provider: "claude", Model: "m", Attempt: 2, Seam: wire.SeamContinuation},
		{Kind: wire.KindChunk, Content: "Hi", Provider: "claude", Model: "m", Attempt: 2},
		{Kind: wire.KindEnd, Status: wire.StatusDone, FinishReason: "stop", Attempts: 2},
	}, -1)
	got, _ := json.Marshal(m.Message().Content)
	want := `[{"type":"thinking","thinking":"Cut ","signature":""},{"type":"thinking","thinking":"Anew.","signature":"sig2"},{"type":"text","text":"Hi"}]`
	if string(got) != want {
		t.Errorf("content\n %s\nwant\n %s", got, want)
	}
}
