package edge

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/relaydev/relay/relay/chunklog"
	"github.com/relaydev/relay/relay/dialect/anthropic"
	"github.com/relaydev/relay/relay/dialect/chat"
	"github.com/relaydev/relay/relay/dialect/responses"
	"github.com/relaydev/relay/relay/wire"
)

// snapshotFrames are a stream's first frames, stored before a snapshot
// resume: reasoning, text and a tool call whose arguments are cut
// short; snapshotRest are the frames stored after it.
func snapshotFrames() []wire.Frame {
	return []wire.Frame{
		{Kind: wire.KindChunk, Role: "assistant", Reasoning: "think ", Provider: "alpha", Model: testModel, Attempt: 1},
		{Kind: wire.KindChunk, Reasoning: "more", Provider: "alpha", Model: testModel, Attempt: 1},
		{Kind: wire.KindChunk, Content: "Hel", Provider: "alpha", Model: testModel, Attempt: 1},
		{Kind: wire.KindChunk, Content: "lo", Provider: "alpha", Model: testModel, Attempt: 1},
		{Kind: wire.KindChunk, ToolCalls: chat.ToolFragment(0, "call_1", "f", `{"a":`), Provider: "alpha", Model: testModel, Attempt: 1},
		{Kind: wire.KindChunk, ToolCalls: chat.ToolFragment(0, "", "", `1`), Provider: "alpha", Model: testModel, Attempt: 1},
	}
}

func snapshotRest() []wire.Frame {
	return []wire.Frame{
		{Kind: wire.KindChunk, ToolCalls: chat.ToolFragment(0, "", "", `}`), Provider: "alpha", Model: testModel, Attempt: 1},
		{Kind: wire.KindEnd, Status: wire.StatusDone, FinishReason: "tool_calls", Attempts: 1,
			Usage: &wire.Usage{PromptTokens: 4, CompletionTokens: 7, TotalTokens: 11}},
	}
}

// appendFrames stores frames after the last one of stream id, at cursor
// last, as the worker would go on.
func (e *env) appendFrames(id string, last wire.Cursor, frames []wire.Frame) {
	e.t.Helper()
	w := chunklog.NewWriter(e.js, chunklog.NewReader(e.nc, ""), id, last.JSSeq, last.Seq)
	for _, f := range frames {
		if _, err := w.Append(context.Background(), f); err != nil {
			e.t.Fatal(err)
		}
	}
}

// snapshotChunk is the part of a snapshot chunk the tests check.
type snapshotChunk struct {
	Choices []struct {
		Delta struct {
			Role      string          `json:"role"`
			Content   string          `json:"content"`
			Reasoning string          `json:"reasoning_content"`
			ToolCalls []chat.ToolCall `json:"tool_calls"`
		} `json:"delta"`
	} `json:"choices"`
	Relay struct {
		Seq      uint64 `json:"seq"`
		Cursor   string `json:"cursor"`
		Snapshot bool   `json:"snapshot"`
		Chunks   int    `json:"chunks"`
	} `json:"relay"`
}

// TestSnapshotResumeChat: GET /v1/streams/{id}?snapshot=true of a stream
// being generated sends what was said so far as one chunk, whose id is
// the cursor of the last frame it covers, then the live chunks; a plain
// resume after that cursor gets what followed it.
func TestSnapshotResumeChat(t *testing.T) {
	e := newEnv(t)
	edge := e.startEdge(Config{})
	id := wire.NewStreamID()
	cursors := e.writeStream(id, wire.Meta{Model: testModel, Created: 1700000000}, snapshotFrames())

	res := do(t, "GET", edge.url+"/v1/streams/"+id+"?snapshot=true", "", nil)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", res.StatusCode, readAll(t, res))
	}
	defer res.Body.Close()
	br := bufio.NewReader(res.Body)
	first := frameEvents(readEvents(t, br, func(ev sseEvent) bool { return ev.Data != "" }))[0]
	var snap snapshotChunk
	if err := json.Unmarshal([]byte(first.Data), &snap); err != nil {
		t.Fatal(err)
	}
	last := cursors[len(cursors)-1]
	d := snap.Choices[0].Delta
	if first.ID != e.seal(last) || snap.Relay.Cursor != first.ID || snap.Relay.Seq != last.Seq || !snap.Relay.Snapshot || snap.Relay.Chunks != 6 ||
		d.Role != "assistant" || d.Content != "Hello" || d.Reasoning != "think more" || len(d.ToolCalls) != 1 ||
		d.ToolCalls[0].ID != "call_1" || d.ToolCalls[0].Function.Name != "f" || d.ToolCalls[0].Function.Arguments != `{"a":1` {
		t.Fatalf("snapshot %s\n%+v", first.Data, snap)
	}

	e.appendFrames(id, last, snapshotRest())
	live := frameEvents(readEvents(t, br, func(ev sseEvent) bool { return ev.Data == "[DONE]" }))
	plain := frameEvents(parseSSE(t, readAll(t, do(t, "GET", edge.url+"/v1/streams/"+id, "", http.Header{"Last-Event-ID": {first.ID}}))))
	if len(live) != 2 || !strings.Contains(live[0].Data, `"arguments":"}"`) || !strings.Contains(live[1].Data, `"finish_reason":"tool_calls"`) {
		t.Fatalf("after the snapshot %+v", live)
	}
	if len(plain) != len(live) || plain[0] != live[0] || plain[1] != live[1] {
		t.Fatalf("a resume after the snapshot's cursor\n%+v\nwant\n%+v", plain, live)
	}

	// An ended stream: the snapshot, then its end.
	ended := frameEvents(parseSSE(t, readAll(t, do(t, "GET", edge.url+"/v1/streams/"+id+"?snapshot=true", "", nil))))
	if len(ended) != 2 || !strings.Contains(ended[0].Data, `"arguments":"{\"a\":1}"`) || ended[1] != live[1] {
		t.Fatalf("snapshot of an ended stream %+v", ended)
	}
	if res := do(t, "GET", edge.url+"/v1/streams/"+id+"?snapshot=maybe", "", nil); res.StatusCode != http.StatusBadRequest {
		t.Fatalf("snapshot=maybe: %d", res.StatusCode)
	}
}

// TestSnapshotResumeResponses: the Responses resume with snapshot folds the
// deltas of each part stored so far into one, numbered as the last it
// covers, and then writes the live events as a plain resume numbers them.
func TestSnapshotResumeResponses(t *testing.T) {
	e := newEnv(t)
	edge := e.startEdge(Config{})
	id := wire.NewStreamID()
	cursors := e.writeStream(id, wire.Meta{Model: testModel, Created: 1700000000}, snapshotFrames())
	url := edge.url + "/v1/responses/" + responses.ResponseID(id) + "?stream=true"

	res := do(t, "GET", url+"&snapshot=true", "", nil)
	defer res.Body.Close()
	br := bufio.NewReader(res.Body)
	// created, in_progress; a reasoning item, its part, one delta; the
	// reasoning's done events; a message, its part, one delta, its done
	// events; the call and one delta of its arguments.
	var folded []respEvent
	for len(folded) < 16 {
		for _, ev := range readEvents(t, br, func(ev sseEvent) bool { return ev.Data != "" }) {
			if ev.Data != "" {
				folded = append(folded, decodeRespEvent(t, ev))
			}
		}
	}
	e.appendFrames(id, cursors[len(cursors)-1], snapshotRest())
	var rest []respEvent
	for _, ev := range readEvents(t, br, func(ev sseEvent) bool { return strings.Contains(ev.Event, "response.completed") }) {
		if ev.Data != "" {
			rest = append(rest, decodeRespEvent(t, ev))
		}
	}

	all := respEvents(t, readAll(t, do(t, "GET", url, "", nil)))
	var text, reasoning, args string
	for i, ev := range folded {
		if i > 0 && ev.Seq <= folded[i-1].Seq || all[ev.Seq].Type != ev.Type {
			t.Fatalf("folded event %d: %+v, the stream's %+v", i, ev, all[ev.Seq])
		}
		switch ev.Type {
		case "response.output_text.delta":
			text += ev.Delta
		case "response.reasoning_text.delta":
			reasoning += ev.Delta
		case "response.function_call_arguments.delta":
			args += ev.Delta
		}
	}
	lastSeq := folded[len(folded)-1].Seq
	if text != "Hello" || reasoning != "think more" || args != `{"a":1` || lastSeq != 18 {
		t.Fatalf("folded %+v", folded)
	}
	if want := all[lastSeq+1:]; len(rest) != len(want) || rest[0].Seq != lastSeq+1 || rest[len(rest)-1].Seq != want[len(want)-1].Seq {
		t.Fatalf("after the snapshot %+v\nwant %+v", rest, want)
	}
}

func decodeRespEvent(t *testing.T, ev sseEvent) respEvent {
	t.Helper()
	var re respEvent
	if err := json.Unmarshal([]byte(ev.Data), &re); err != nil || re.Type != ev.Event {
		t.Fatalf("event %q %s: %v", ev.Event, ev.Data, err)
	}
	return re
}

// TestSnapshotResumeMessages: GET /v1/messages/{id}?snapshot=true folds
// the deltas of each block so far into one, with the id of the last it
// covers; the events after it are the ones a plain resume after that id
// gets.
func TestSnapshotResumeMessages(t *testing.T) {
	e := newEnv(t)
	edge := e.startEdge(Config{})
	id := wire.NewStreamID()
	e.writeStream(id, wire.Meta{Model: testModel, Created: 1700000000}, append(snapshotFrames(), snapshotRest()...))
	url := edge.url + "/v1/messages/" + anthropic.MessageID(id)

	folded := msgEvents(t, readAll(t, do(t, "GET", url+"?snapshot=true", "", nil)))
	all := msgEvents(t, readAll(t, do(t, "GET", url, "", http.Header{"Accept": {"text/event-stream"}})))
	var types []string
	var thinking, text, input string
	prev := -1
	for i, ev := range folded {
		n, _ := strconv.Atoi(ev.id)
		if n <= prev || all[n].Type != ev.Type {
			t.Fatalf("folded event %d: %+v, the stream's %+v", i, ev, all[n])
		}
		prev = n
		types = append(types, ev.Type)
		if ev.Delta != nil {
			thinking, text, input = thinking+ev.Delta.Thinking, text+ev.Delta.Text, input+ev.Delta.PartialJSON
		}
	}
	want := "message_start content_block_start content_block_delta content_block_stop content_block_start content_block_delta content_block_stop content_block_start content_block_delta content_block_stop message_delta message_stop"
	if strings.Join(types, " ") != want || thinking != "think more" || text != "Hello" || input != `{"a":1}` {
		t.Fatalf("folded %v: %q %q %q", types, thinking, text, input)
	}
	// The tool's input was folded up to the snapshot; its last fragment
	// came after it.
	if folded[len(folded)-3].id != all[len(all)-3].id {
		t.Fatalf("the last events are not the stream's: %+v", folded)
	}
}

// TestSnapshotResumeWebSocket: a WebSocket resume with "snapshot": true
// gets one chunk message with what was said so far, then the end.
func TestSnapshotResumeWebSocket(t *testing.T) {
	e := newEnv(t)
	edge := e.startEdge(Config{})
	id := wire.NewStreamID()
	cursors := e.writeStream(id, wire.Meta{Model: testModel, Created: 1700000000}, append(snapshotFrames(), snapshotRest()...))
	conn := dialWS(t, edge)
	sendWS(t, conn, `{"type":"resume","stream_id":"`+id+`","after":"`+e.seal(cursors[1])+`","snapshot":true}`)
	msgs := readStream(t, conn)
	if len(msgs) != 2 || msgs[0].Type != "chunk" || msgs[0].Cursor != e.seal(cursors[6]) || msgs[1].Type != "end" {
		t.Fatalf("messages %+v", msgs)
	}
	var snap snapshotChunk
	if err := json.Unmarshal(msgs[0].Chunk, &snap); err != nil {
		t.Fatal(err)
	}
	// After the cursor: the reasoning it covers is not in the snapshot.
	d := snap.Choices[0].Delta
	if d.Reasoning != "" || d.Content != "Hello" || d.ToolCalls[0].Function.Arguments != `{"a":1}` || snap.Relay.Chunks != 5 {
		t.Fatalf("snapshot %s", msgs[0].Chunk)
	}
}
