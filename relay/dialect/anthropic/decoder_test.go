package anthropic

import (
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/relaydev/relay/relay/dialect/chat"
	"github.com/relaydev/relay/relay/wire"
)

// answer is what the Deltas of a stream say, joined.
type answer struct {
	role, content, reasoning, finish, model string
	toolCalls                               []string
	usage                                   *chat.Usage
}

// decodeAll decodes the data of a stream's events, each of the type it
// names, until an error: the one that ends the stream (io.EOF at
// message_stop) or any other. Events without a Delta are skipped.
func decodeAll(trimmed string, events ...string) (answer, error) {
	dec := NewDecoder(trimmed)
	var a answer
	for _, data := range events {
		var typ struct{ Type string }
		_ = json.Unmarshal([]byte(data), &typ)
		d, err := dec.Decode(typ.Type, []byte(data))
		switch {
		case errors.Is(err, chat.ErrNoDelta):
			continue
		case err != nil:
			return a, err
		}
		a.role, a.model = a.role+d.Role, a.model+d.Model
		a.content, a.reasoning, a.finish = a.content+d.Content, a.reasoning+d.Reasoning, a.finish+d.FinishReason
		if d.ToolCalls != nil {
			a.toolCalls = append(a.toolCalls, string(d.ToolCalls))
		}
		if d.Usage != nil {
			a.usage = d.Usage
		}
	}
	return a, nil
}

func TestDecoderEvents(t *testing.T) {
	c, err := decodeAll("",
		`{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude-x","stop_reason":null,"usage":{"input_tokens":10,"cache_creation_input_tokens":5,"cache_read_input_tokens":20,"output_tokens":1}}}`,
		`{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Let me think"}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"sig"}}`,
		`{"type":"content_block_stop","index":0}`,
		`{"type":"ping"}`,
		`{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}`,
		`{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Hello, "}}`,
		`{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"世界"}}`,
		`{"type":"content_block_stop","index":1}`,
		`{"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_1","name":"weather","input":{}}}`,
		`{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":""}}`,
		`{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"city\":"}}`,
		`{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"\"Oslo\"}"}}`,
		`{"type":"content_block_stop","index":2}`,
		`{"type":"content_block_start","index":3,"content_block":{"type":"tool_use","id":"toolu_2","name":"time","input":{}}}`,
		`{"type":"content_block_stop","index":3}`,
		`{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":42}}`,
		`{"type":"message_stop"}`,
	)
	if err != io.EOF {
		t.Fatalf("Decode = %v, want io.EOF at message_stop", err)
	}
	if c.role != "assistant" || c.model != "claude-x" || c.content != "Hello, 世界" || c.reasoning != "Let me think" || c.finish != "tool_calls" {
		t.Errorf("got %+v", c)
	}
	wantTools := []string{
		`[{"index":0,"id":"toolu_1","type":"function","function":{"name":"weather","arguments":""}}]`,
		`[{"index":0,"function":{"arguments":"{\"city\":"}}]`,
		`[{"index":0,"function":{"arguments":"\"Oslo\"}"}}]`,
		`[{"index":1,"id":"toolu_2","type":"function","function":{"name":"time","arguments":""}}]`,
		`[{"index":1,"function":{"arguments":"{}"}}]`,
	}
	if strings.Join(c.toolCalls, "\n") != strings.Join(wantTools, "\n") {
		t.Errorf("tool_calls fragments:\n%s\nwant\n%s", strings.Join(c.toolCalls, "\n"), strings.Join(wantTools, "\n"))
	}
	want := chat.Usage{PromptTokens: 35, CompletionTokens: 42, TotalTokens: 77,
		PromptTokensDetails: wire.TokenCounts{{Name: "cached_tokens", N: 20}, {Name: wire.CacheCreationTokens, N: 5}}}
	if c.usage == nil || !reflect.DeepEqual(*c.usage, want) {
		t.Errorf("usage = %+v, want %+v (cached input counts as prompt, its parts as details)", c.usage, want)
	}
}

func TestFinishReasons(t *testing.T) {
	for reason, want := range map[string]string{
		"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length", "tool_use": "tool_calls",
		"refusal": "content_filter", "pause_turn": "length", "some_future_reason": "length",
	} {
		if got := finishReason(reason); got != want {
			t.Errorf("finishReason(%q) = %q, want %q", reason, got, want)
		}
	}
}

func TestDecoderPrefillContinuation(t *testing.T) {
	tests := []struct {
		name, prefill string
		deltas        []string
		want          string
	}{
		{name: "model restates the space", prefill: "Hello ", deltas: []string{" world"}, want: "world"},
		{name: "restated across deltas", prefill: "Hello\n\n", deltas: []string{"\n", "", "\nNext"}, want: "Next"},
		{name: "model does not restate it", prefill: "Hello ", deltas: []string{"world"}, want: "world"},
		{name: "other whitespace is kept", prefill: "Hello ", deltas: []string{"\nworld"}, want: "\nworld"},
		{name: "longer whitespace keeps the excess", prefill: "Hello ", deltas: []string{"  world"}, want: " world"},
		{name: "no trailing whitespace", prefill: "Hello", deltas: []string{" world"}, want: " world"},
		{name: "later deltas are never stripped", prefill: "Hello ", deltas: []string{"there", " ", "you"}, want: "there you"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			events := []string{`{"type":"message_start","message":{"model":"m","usage":{"input_tokens":1}}}`,
				`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`}
			for _, d := range tc.deltas {
				b, _ := json.Marshal(map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]string{"type": "text_delta", "text": d}})
				events = append(events, string(b))
			}
			events = append(events, `{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":2}}`, `{"type":"message_stop"}`)
			chat, _ := json.Marshal(map[string]any{"model": "m", "messages": []map[string]string{
				{"role": "user", "content": "Say hi"}, {"role": "assistant", "content": tc.prefill}}})
			got, trimmed, err := FromChat(chat)
			if err != nil {
				t.Fatal(err)
			}
			c, err := decodeAll(trimmed, events...)
			if err != io.EOF {
				t.Fatalf("Decode = %v, want io.EOF", err)
			}
			if c.content != tc.want {
				t.Errorf("continuation = %q, want %q", c.content, tc.want)
			}
			var req Request
			_ = json.Unmarshal(got, &req)
			last := req.Messages[len(req.Messages)-1]
			if text := last.Content[len(last.Content)-1].Text; strings.TrimSpace(text) != text {
				t.Errorf("prefill sent = %q, with trailing whitespace Anthropic refuses", text)
			}
		})
	}
}
