package edge

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"reflect"
	"testing"

	"github.com/relaydev/relay/relay/dialect/anthropic"
	"github.com/relaydev/relay/relay/wire"
)

// anthropicFrames are the frames the worker makes of the Anthropic fixture
// (relay/worker's TestAnthropicStreamFrames keeps them current).
func anthropicFrames(t *testing.T) []wire.Frame {
	t.Helper()
	raw, err := os.ReadFile("../relay/worker/testdata/anthropic_messages_full.frames.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	var frames []wire.Frame
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		f, err := wire.DecodeFrame(sc.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		frames = append(frames, f)
	}
	return frames
}

// textMembers are the members holding a content_block_delta's text, by
// delta type.
var textMembers = map[string]string{"text_delta": "text", "thinking_delta": "thinking", "input_json_delta": "partial_json"}

// comparableEvents are the events of a Messages stream without pings,
// each data decoded, less what the relay writes itself: the message id,
// message_start's usage, which the edge sends before the provider
// answered (message_delta has it all), and the cut of text into deltas
// (the worker merges the deltas that arrive while it stores a chunk), so
// consecutive text deltas of a block are joined. An input_json_delta
// without text says nothing and is not kept either.
func comparableEvents(t *testing.T, body string) (names []string, data []map[string]any) {
	t.Helper()
	for _, ev := range parseSSE(t, body) {
		if ev.Event == "" || ev.Event == "ping" {
			continue
		}
		var d map[string]any
		if err := json.Unmarshal([]byte(ev.Data), &d); err != nil {
			t.Fatalf("%s: %v", ev.Data, err)
		}
		if delta, _ := d["delta"].(map[string]any); delta["type"] == "input_json_delta" && delta["partial_json"] == "" {
			continue
		}
		if msg, ok := d["message"].(map[string]any); ok {
			delete(msg, "id")
			delete(msg, "usage")
		}
		if n := len(data) - 1; n >= 0 && joinText(data[n], d) {
			continue
		}
		names, data = append(names, ev.Event), append(data, d)
	}
	return names, data
}

// joinText appends the text of d to prev when both are text deltas of one
// type on one block.
func joinText(prev, d map[string]any) bool {
	pd, _ := prev["delta"].(map[string]any)
	dd, _ := d["delta"].(map[string]any)
	member := textMembers[fmt.Sprint(dd["type"])]
	if member == "" || prev["type"] != "content_block_delta" || d["type"] != "content_block_delta" || prev["index"] != d["index"] || pd["type"] != dd["type"] {
		return false
	}
	pd[member] = fmt.Sprint(pd[member]) + fmt.Sprint(dd[member])
	return true
}

// TestMessagesFromAnthropicProvider is the edge's step of the Anthropic
// pass-through golden test: the frames the worker made of the fixture
// render, for a Messages client, as the fixture's events, member by
// member: thinking with its signature, redacted thinking, text blocks
// with their citations, the tool call, the stop sequence and the cache
// counts.
func TestMessagesFromAnthropicProvider(t *testing.T) {
	fixture, err := os.ReadFile("../relay/dialect/anthropic/testdata/messages_full.sse")
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t)
	edge := e.startEdge(Config{})
	e.writeStream(fixedID, wire.Meta{Model: "claude-sonnet-4-5", Created: 1700000000}, anthropicFrames(t))
	url := edge.url + "/v1/messages/" + anthropic.MessageID(fixedID)

	gotNames, got := comparableEvents(t, readAll(t, do(t, "GET", url, "", http.Header{"Accept": {"text/event-stream"}})))
	wantNames, want := comparableEvents(t, string(fixture))
	if !reflect.DeepEqual(gotNames, wantNames) {
		t.Fatalf("events\n %v\nwant\n %v", gotNames, wantNames)
	}
	for i := range want {
		if !reflect.DeepEqual(got[i], want[i]) {
			g, _ := json.Marshal(got[i])
			w, _ := json.Marshal(want[i])
			t.Errorf("event %d (%s):\n %s\nwant\n %s", i, gotNames[i], g, w)
		}
	}

	res := do(t, "GET", url, "", nil)
	var msg struct {
		Content      []map[string]any `json:"content"`
		StopReason   string           `json:"stop_reason"`
		StopSequence string           `json:"stop_sequence"`
		Usage        anthropic.Usage  `json:"usage"`
	}
	if err := jsonDecode(res, &msg); err != nil {
		t.Fatal(err)
	}
	if len(msg.Content) != 6 || msg.Content[0]["signature"] == "" || msg.Content[1]["data"] == nil || msg.Content[3]["citations"] == nil || msg.Content[3]["text"] != "the grass is green" {
		t.Errorf("content = %v", msg.Content)
	}
	if want := (anthropic.Usage{InputTokens: 25, CacheCreationInputTokens: 1200, CacheReadInputTokens: 800, OutputTokens: 89,
		ServerToolUse: wire.TokenCounts{{Name: "web_search_requests", N: 1}}}); msg.StopReason != "stop_sequence" || msg.StopSequence != "\n\nHuman:" || !reflect.DeepEqual(msg.Usage, want) {
		t.Errorf("stop %q %q, usage %+v, want stop_sequence and %+v", msg.StopReason, msg.StopSequence, msg.Usage, want)
	}
}

// TestChatFromAnthropicProvider: a chat client gets, of the Anthropic
// fixture, what chat has a place for: the thinking as reasoning_content,
// a web citation as a url_citation annotation spanning its block, the
// cache counts in prompt_tokens_details, and finish_reason stop for the
// stop sequence.
func TestChatFromAnthropicProvider(t *testing.T) {
	e := newEnv(t)
	edge := e.startEdge(Config{})
	e.writeStream(fixedID, wire.Meta{Model: "claude-sonnet-4-5", Created: 1700000000}, anthropicFrames(t))
	var (
		reasoning, content string
		annotations        []json.RawMessage
		last               []byte
	)
	for _, ev := range parseSSE(t, readAll(t, do(t, "GET", edge.url+"/v1/streams/"+fixedID, "", nil))) {
		if ev.ID == "" {
			continue
		}
		var c struct {
			Choices []struct {
				Delta struct {
					Content          string            `json:"content"`
					ReasoningContent string            `json:"reasoning_content"`
					Annotations      []json.RawMessage `json:"annotations"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(ev.Data), &c); err != nil {
			t.Fatal(err)
		}
		for _, ch := range c.Choices {
			reasoning += ch.Delta.ReasoningContent
			content += ch.Delta.Content
			annotations = append(annotations, ch.Delta.Annotations...)
		}
		last = []byte(ev.Data)
	}
	if reasoning != "The document says the grass is green." {
		t.Errorf("reasoning_content %q", reasoning)
	}
	if len(annotations) != 1 {
		t.Fatalf("annotations %s, want the web citation", annotations)
	}
	var a struct {
		Type        string `json:"type"`
		URLCitation struct {
			StartIndex int    `json:"start_index"`
			EndIndex   int    `json:"end_index"`
			URL        string `json:"url"`
		} `json:"url_citation"`
	}
	if err := json.Unmarshal(annotations[0], &a); err != nil {
		t.Fatal(err)
	}
	runes := []rune(content)
	if a.Type != "url_citation" || a.URLCitation.URL != "https://example.com/grass" || a.URLCitation.EndIndex > len(runes) ||
		string(runes[a.URLCitation.StartIndex:a.URLCitation.EndIndex]) != "the grass is green" {
		t.Errorf("annotation %s on %q, want the cited block", annotations[0], content)
	}
	if got := path(t, last, "usage", "prompt_tokens_details"); got != `{"cached_tokens":800,"cache_creation_input_tokens":1200}` {
		t.Errorf("prompt_tokens_details = %s", got)
	}
	if got := path(t, last, "choices", "0", "finish_reason"); got != `"stop"` {
		t.Errorf("finish_reason = %s", got)
	}
}
