package uimessage

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/relaydev/relay/relay/wire"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// sse renders frames as the UI message stream's SSE body, as the edge
// writes it.
func sse(frames []wire.Frame) string {
	var b strings.Builder
	e := NewEncoder(MessageID("s1"))
	emit := func(c []byte) { b.WriteString("data: " + string(c) + "\n\n") }
	e.Start(emit)
	for _, f := range frames {
		e.Frame(f, emit)
	}
	b.WriteString("data: " + Done + "\n\n")
	return b.String()
}

// chunks renders frames as their chunks' JSON objects.
func chunks(frames []wire.Frame) []map[string]any {
	var out []map[string]any
	e := NewEncoder("m")
	for _, f := range frames {
		e.Frame(f, func(c []byte) {
			var v map[string]any
			if err := json.Unmarshal(c, &v); err != nil {
				panic(err)
			}
			out = append(out, v)
		})
	}
	return out
}

func types(cs []map[string]any) string {
	var t []string
	for _, c := range cs {
		t = append(t, c["type"].(string))
	}
	return strings.Join(t, " ")
}

// fullAnswer has reasoning, text in two blocks, a url citation, a claim,
// a tool call whose
// arguments stream over two chunks, and a done end.
var fullAnswer = []wire.Frame{
	{Kind: wire.KindClaim, Worker: "w1"},
	{Kind: wire.KindChunk, Seq: 1, Role: "assistant", Reasoning: "Think"},
	{Kind: wire.KindChunk, Seq: 2, Reasoning: " more."},
	{Kind: wire.KindChunk, Seq: 3, Content: "Die "},
	{Kind: wire.KindChunk, Seq: 4, Content: "Brücke 橋"},
	{Kind: wire.KindChunk, Seq: 5, Content: "Second block.", NewBlock: true,
		Annotations: json.RawMessage(`[{"type":"url_citation","url_citation":{"start_index":0,"end_index":6,"title":"Bonn","url":"https://bonn.de"}},{"type":"file_citation"}]`)},
	{Kind: wire.KindChunk, Seq: 6, ToolCalls: json.RawMessage(`[{"index":0,"id":"call_1","type":"function","function":{"name":"weather","arguments":"{\"ci"}}]`)},
	{Kind: wire.KindChunk, Seq: 7, ToolCalls: json.RawMessage(`[{"index":0,"function":{"arguments":"ty\":\"Bonn\"}"}}]`)},
	{Kind: wire.KindEnd, Seq: 8, Status: wire.StatusDone, FinishReason: "tool_calls"},
}

// TestEncoderGolden: the SSE body of a whole answer is testdata's, byte
// for byte (go test -update rewrites it).
func TestEncoderGolden(t *testing.T) {
	for name, frames := range map[string][]wire.Frame{
		"full": fullAnswer,
		"incomplete": {
			{Kind: wire.KindChunk, Seq: 1, Content: "Half an ans"},
			{Kind: wire.KindEnd, Seq: 2, Status: wire.StatusIncomplete, Error: &wire.Error{Message: "the provider failed for good", Type: wire.TypeIncomplete, Code: wire.CodeRetriesExhausted}},
		},
		"cancelled": {
			{Kind: wire.KindChunk, Seq: 1, Content: "Stopped"},
			{Kind: wire.KindEnd, Seq: 2, Status: wire.StatusCancelled},
		},
	} {
		t.Run(name, func(t *testing.T) {
			got := sse(frames)
			path := "testdata/" + name + ".sse"
			if *update {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				t.Errorf("rendered\n%s\nwant (%s)\n%s", got, path, want)
			}
		})
	}
}

// TestEncoderFinishesOnlyDone: only a done end has finish; a failed or
// incomplete one ends with error and a cancelled one with abort, after
// the open text part is closed.
func TestEncoderFinishesOnlyDone(t *testing.T) {
	for status, want := range map[wire.Status]string{
		wire.StatusDone:       "start start-step text-start text-delta text-end finish-step finish",
		wire.StatusIncomplete: "start start-step text-start text-delta text-end error",
		wire.StatusFailed:     "start start-step text-start text-delta text-end error",
		wire.StatusCancelled:  "start start-step text-start text-delta text-end abort",
	} {
		got := chunks([]wire.Frame{{Kind: wire.KindChunk, Content: "x"}, {Kind: wire.KindEnd, Status: status}})
		if types(got) != want {
			t.Errorf("%s: %s, want %s", status, types(got), want)
		}
		if status == wire.StatusDone && got[len(got)-1]["finishReason"] != "stop" {
			t.Errorf("done without a reason finishes %v", got[len(got)-1])
		}
		if status == wire.StatusFailed && got[len(got)-1]["errorText"] == "" {
			t.Errorf("failed without a message: %v", got[len(got)-1])
		}
	}
}

// TestEncoderFinishReasons: chat's reasons in the UI stream's words.
func TestEncoderFinishReasons(t *testing.T) {
	for chat, want := range map[string]string{"stop": "stop", "length": "length", "tool_calls": "tool-calls",
		"content_filter": "content-filter", "something_new": "other"} {
		got := chunks([]wire.Frame{{Kind: wire.KindEnd, Status: wire.StatusDone, FinishReason: chat}})
		if r := got[len(got)-1]["finishReason"]; r != want {
			t.Errorf("%s: finishReason %v, want %s", chat, r, want)
		}
	}
}

// TestEncoderToolInput: a tool call's streamed arguments are its input
// once the answer is done; arguments that are not JSON are an input
// error, and a call is announced once it has its id and name, with what
// streamed before.
func TestEncoderToolInput(t *testing.T) {
	got := chunks(fullAnswer)
	var deltas strings.Builder
	var available map[string]any
	for _, c := range got {
		switch c["type"] {
		case "tool-input-delta":
			deltas.WriteString(c["inputTextDelta"].(string))
		case "tool-input-available":
			available = c
		}
	}
	if deltas.String() != `{"city":"Bonn"}` {
		t.Errorf("deltas %q", deltas.String())
	}
	if in, _ := json.Marshal(available["input"]); string(in) != `{"city":"Bonn"}` || available["toolName"] != "weather" || available["toolCallId"] != "call_1" {
		t.Errorf("tool-input-available %v", available)
	}
	late := chunks([]wire.Frame{
		{Kind: wire.KindChunk, ToolCalls: json.RawMessage(`[{"index":0,"function":{"arguments":"{\"a\""}}]`)},
		{Kind: wire.KindChunk, ToolCalls: json.RawMessage(`[{"index":0,"id":"c","function":{"name":"f","arguments":":1"}}]`)},
		{Kind: wire.KindEnd, Status: wire.StatusDone, FinishReason: "tool_calls"},
	})
	if types(late) != "start start-step tool-input-start tool-input-delta tool-input-error finish-step finish" || late[3]["inputTextDelta"] != `{"a":1` {
		t.Errorf("late name: %v", late)
	}
}

// TestEncoderDeterministic: the same frames render the same chunks, so a
// replay from the start (a reloaded page) replaces the message exactly.
func TestEncoderDeterministic(t *testing.T) {
	if a, b := sse(fullAnswer), sse(fullAnswer); a != b {
		t.Fatalf("two renderings differ:\n%s\n%s", a, b)
	}
}

// TestEncoderNothingAfterTheEnd: an end is the last thing rendered, and a
// cut (the edge cannot finish) is an error.
func TestEncoderNothingAfterTheEnd(t *testing.T) {
	e := NewEncoder("m")
	var n int
	emit := func([]byte) { n++ }
	e.Frame(wire.Frame{Kind: wire.KindEnd, Status: wire.StatusDone}, emit)
	before := n
	e.Frame(wire.Frame{Kind: wire.KindChunk, Content: "late"}, emit)
	if n != before || !e.Ended() {
		t.Fatalf("rendered %d chunks after the end", n-before)
	}
	var out bytes.Buffer
	c := NewEncoder("m")
	c.Cut(&wire.Error{Message: "reconnect"}, func(b []byte) { out.Write(b); out.WriteByte('\n') })
	if !strings.HasSuffix(out.String(), `{"type":"error","errorText":"reconnect"}`+"\n") {
		t.Fatalf("cut renders %s", out.String())
	}
}

// TestEncoderFolds: folding, the deltas of one part that follow each other
// are one delta, in order with every other chunk, and the folded message
// says what the whole rendering says; after Unfold each frame is its own
// delta again.
func TestEncoderFolds(t *testing.T) {
	var folded []map[string]any
	e := NewEncoder("m")
	emit := func(c []byte) {
		var v map[string]any
		if err := json.Unmarshal(c, &v); err != nil {
			t.Fatal(err)
		}
		folded = append(folded, v)
	}
	e.Fold()
	for _, f := range fullAnswer[:len(fullAnswer)-1] {
		e.Frame(f, emit)
	}
	e.Unfold(emit)
	e.Frame(fullAnswer[len(fullAnswer)-1], emit)
	want := "start start-step reasoning-start reasoning-delta reasoning-end text-start text-delta text-end text-start text-delta source-url text-end tool-input-start tool-input-delta tool-input-available finish-step finish"
	if got := types(folded); got != want {
		t.Fatalf("folded:\n %s\nwant\n %s", got, want)
	}
	if folded[3]["delta"] != "Think more." || folded[6]["delta"] != "Die Brücke 橋" || folded[13]["inputTextDelta"] != `{"city":"Bonn"}` {
		t.Fatalf("folded deltas: %v, %v, %v", folded[3], folded[6], folded[13])
	}

	var live []string
	e = NewEncoder("m")
	e.Fold()
	e.Frame(fullAnswer[3], func([]byte) {})
	e.Unfold(func(c []byte) { live = append(live, string(c)) })
	e.Frame(fullAnswer[4], func(c []byte) { live = append(live, string(c)) })
	if len(live) != 2 || !strings.Contains(live[0], `"delta":"Die "`) || !strings.Contains(live[1], `"delta":"Brücke 橋"`) {
		t.Fatalf("after Unfold: %q", live)
	}
}

// FuzzEncoder: whatever the frames, every chunk is a JSON object with a
// type, the message starts once, and it finishes at most once, only for
// a done end, last.
func FuzzEncoder(f *testing.F) {
	f.Add("r", "text", []byte(`[{"index":0,"id":"a","function":{"name":"f","arguments":"{}"}}]`), true, "done")
	f.Add("", "", []byte(`[{"index":1}]`), false, "incomplete")
	f.Fuzz(func(t *testing.T, reasoning, content string, tools []byte, newBlock bool, status string) {
		frames := []wire.Frame{
			{Kind: wire.KindChunk, Reasoning: reasoning, Content: content, NewBlock: newBlock, ToolCalls: tools},
			{Kind: wire.KindChunk, Content: content, ToolCalls: tools},
			{Kind: wire.KindEnd, Status: wire.Status(status)},
		}
		got := chunks(frames)
		starts, finishes := 0, 0
		for i, c := range got {
			switch c["type"] {
			case "start":
				starts++
			case "finish":
				finishes++
				if i != len(got)-1 || status != string(wire.StatusDone) {
					t.Fatalf("finish at %d of %d, status %q", i, len(got), status)
				}
			case nil, "":
				t.Fatalf("chunk without a type: %v", c)
			}
		}
		if starts != 1 || finishes > 1 || status == string(wire.StatusDone) && finishes != 1 {
			t.Fatalf("%d starts, %d finishes: %s", starts, finishes, types(got))
		}
	})
}
