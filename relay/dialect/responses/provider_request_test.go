package responses

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

// sameJSON fails t unless got is the JSON value want.
func sameJSON(t *testing.T, got []byte, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("%s: %v", got, err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("want is not JSON: %v", err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

func TestFromChat(t *testing.T) {
	out, err := FromChat([]byte(`{
		"model": "gpt-x", "stream": true, "stream_options": {"include_usage": true}, "max_tokens": 50,
		"temperature": 0.2, "reasoning_effort": "low", "user": "u1", "parallel_tool_calls": true,
		"messages": [
			{"role": "developer", "content": "Be brief."},
			{"role": "user", "content": [{"type": "text", "text": "Weather?"}, {"type": "image_url", "image_url": {"url": "https://x/img.png"}}]},
			{"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{\"city\":\"Oslo\"}"}}]},
			{"role": "tool", "tool_call_id": "call_1", "content": "rain"},
			{"role": "assistant", "content": "It rains."}
		],
		"tools": [{"type": "function", "function": {"name": "weather", "parameters": {"type": "object"}}}],
		"tool_choice": {"type": "function", "function": {"name": "weather"}}
	}`))
	if err != nil {
		t.Fatalf("FromChat: %v", err)
	}
	sameJSON(t, out, `{
		"model": "gpt-x", "max_output_tokens": 50, "temperature": 0.2, "reasoning": {"effort": "low"},
		"user": "u1", "parallel_tool_calls": true, "store": false, "stream": true,
		"input": [
			{"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "Be brief."}]},
			{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Weather?"}, {"type": "input_image", "image_url": "https://x/img.png"}]},
			{"type": "function_call", "call_id": "call_1", "name": "weather", "arguments": "{\"city\":\"Oslo\"}"},
			{"type": "function_call_output", "call_id": "call_1", "output": "rain"},
			{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "It rains."}]}
		],
		"tools": [{"type": "function", "name": "weather", "parameters": {"type": "object"}, "strict": false}],
		"tool_choice": {"type": "function", "name": "weather"}
	}`)
}

func TestFromChatOutputLimit(t *testing.T) {
	for limit, want := range map[string]float64{`"max_tokens": 1,`: minOutputTokens, `"max_completion_tokens": 300,`: 300, ``: 0} {
		out, err := FromChat([]byte(`{"model": "m", ` + limit + ` "messages": []}`))
		var got map[string]any
		_ = json.Unmarshal(out, &got)
		if n, _ := got["max_output_tokens"].(float64); err != nil || n != want {
			t.Errorf("%s max_output_tokens = %v (%v), want %v", limit, got["max_output_tokens"], err, want)
		}
	}
}

func TestFromChatRefusesStop(t *testing.T) {
	_, err := FromChat([]byte(`{"model":"m","messages":[],"stop":["x"]}`))
	if !errors.Is(err, ErrNoStop) {
		t.Fatalf("FromChat = %v, want ErrNoStop", err)
	}
}
