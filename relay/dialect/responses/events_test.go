package responses

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/relaydev/relay/relay/dialect/chat"
	"github.com/relaydev/relay/relay/wire"
)

// recorded is an event a Renderer wrote.
type recorded struct {
	id, event string
	data      []byte
}

// recorder is a chat.EventWriter that keeps the events.
type recorder []recorded

func (r *recorder) Event(id, event string, data []byte) { *r = append(*r, recorded{id, event, data}) }

const testStream = "sabcdefghijklmnopqrstuvwxyz"

// render renders frames to out, writing the events after sequence number
// after.
func render(frames []wire.Frame, after int, out chat.EventWriter) *Renderer {
	r := NewRenderer(Stream{ID: testStream, Model: "m", Created: 1700000000}, after)
	r.Begin(out)
	for _, f := range frames {
		if f.Kind == wire.KindEnd {
			r.End(out, f, nil)
		} else {
			r.Frame(out, f)
		}
	}
	return r
}

// renderFrames renders frames, writing the events after sequence number
// after.
func renderFrames(frames []wire.Frame, after int) (*Renderer, recorder) {
	var out recorder
	r := render(frames, after, &out)
	return r, out
}

// A stream's events are numbered from 0 without a gap and carry no id; a
// resume after N writes exactly the events numbered after N, and a cut
// repeats the number of the last event written, so that a client that
// resumes after it misses nothing.
func TestRendererNumbersEventsForResumes(t *testing.T) {
	frames := []wire.Frame{
		{Kind: wire.KindClaim, Model: "m"},
		{Kind: wire.KindChunk, Reasoning: "hm", Model: "m"},
		{Kind: wire.KindChunk, Content: "Hel"},
		{Kind: wire.KindChunk, Content: "lo", ToolCalls: json.RawMessage(`[{"index":0,"id":"call_1","function":{"name":"f","arguments":"{}"}}]`)},
		{Kind: wire.KindEnd, Status: wire.StatusDone, FinishReason: "tool_calls"},
	}
	r, all := renderFrames(frames, -1)
	for i, ev := range all {
		var head eventHead
		if err := json.Unmarshal(ev.data, &head); err != nil || head.SequenceNumber != i || head.Type != ev.event || ev.id != "" {
			t.Fatalf("event %d: id %q, %s %s", i, ev.id, ev.event, ev.data)
		}
	}
	if last := all[len(all)-1]; last.event != "response.completed" {
		t.Fatalf("last event %s", last.event)
	}
	for after := range all {
		if _, got := renderFrames(frames, after); len(got) != len(all)-after-1 || len(got) > 0 && !reflect.DeepEqual(got, all[after+1:]) {
			t.Errorf("after %d: %d events, want the %d after it", after, len(got), len(all)-after-1)
		}
	}

	var cut recorder
	r.Cut(&cut, &wire.Error{Message: "draining", Code: "edge_draining"})
	var head eventHead
	if len(cut) != 1 || json.Unmarshal(cut[0].data, &head) != nil || head.Type != "error" || head.SequenceNumber != len(all)-1 {
		t.Fatalf("cut wrote %+v", cut)
	}
}

// The Response built without writing is the one the terminal event
// carries.
func TestRendererBuildsTheResponse(t *testing.T) {
	frames := []wire.Frame{
		{Kind: wire.KindChunk, Content: "Hi", Model: "other"},
		{Kind: wire.KindEnd, Status: wire.StatusDone, FinishReason: "length", Usage: &wire.Usage{PromptTokens: 1, CompletionTokens: 2, TotalTokens: 3}},
	}
	_, events := renderFrames(frames, -1)
	var last struct {
		Response json.RawMessage `json:"response"`
	}
	if err := json.Unmarshal(events[len(events)-1].data, &last); err != nil {
		t.Fatal(err)
	}
	resp := render(frames, -1, nil).Response()
	got, _ := json.Marshal(resp)
	sameJSON(t, got, string(last.Response))
	if resp.Status != StatusIncomplete || resp.IncompleteDetails.Reason != "max_output_tokens" || resp.Model != "other" ||
		resp.Relay == nil || resp.Relay.RequestedModel != "m" || resp.Usage.OutputTokens != 2 || resp.ID != "resp_"+testStream {
		t.Fatalf("Response %+v", resp)
	}
	if it, ok := resp.Item("msg_" + testStream + "_0"); !ok || it.(messageItem).Status != StatusIncomplete {
		t.Fatalf("item msg_…_0: %+v %v", it, ok)
	}
	if sid, ok := StreamOfItem("msg_" + testStream + "_0"); !ok || sid != testStream {
		t.Fatalf("StreamOfItem: %q %v", sid, ok)
	}
}
