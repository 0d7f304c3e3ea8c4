package anthropic

import (
	"encoding/json"
	"reflect"
	"testing"
)

// roundTrip translates chat and returns the Messages request as generic
// JSON, for comparison with the expected request.
func roundTrip(t *testing.T, chat string) (map[string]any, string) {
	t.Helper()
	out, trimmed, err := FromChat([]byte(chat))
	if err != nil {
		t.Fatalf("FromChat: %v", err)
	}
	var got map[string]any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("output is not JSON: %v", err)
	}
	return got, trimmed
}

// jsonEqual fails the test unless got, decoded JSON, is the JSON value
// want.
func jsonEqual(t *testing.T, got any, want string) {
	t.Helper()
	var w any
	if json.Unmarshal([]byte(want), &w) != nil || !reflect.DeepEqual(got, w) {
		t.Fatalf("got  %v\nwant %s", got, want)
	}
}

func TestFromChatConversation(t *testing.T) {
	got, trimmed := roundTrip(t, `{
		"model": "claude-x", "stream": true, "stream_options": {"include_usage": true},
		"max_completion_tokens": 300, "max_tokens": 200, "temperature": 0.5, "top_p": 0.9,
		"stop": "END", "user": "u1", "logit_bias": {"1": 2},
		"messages": [
			{"role": "system", "content": "Be brief."},
			{"role": "developer", "content": [{"type": "text", "text": "Use tools."}]},
			{"role": "user", "content": [{"type": "text", "text": "Weather?"},
				{"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]},
			{"role": "assistant", "content": "Let me look.", "tool_calls": [
				{"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{\"city\":\"Oslo\"}"}},
				{"id": "call_2", "type": "function", "function": {"name": "time", "arguments": ""}}]},
			{"role": "tool", "tool_call_id": "call_1", "content": "rain"},
			{"role": "tool", "tool_call_id": "call_2", "content": ""},
			{"role": "user", "content": "Thanks"}
		],
		"tools": [{"type": "function", "function": {"name": "weather", "description": "Weather of a city",
			"parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}},
			{"type": "function", "function": {"name": "time"}}],
		"tool_choice": "required", "parallel_tool_calls": false
	}`)
	if trimmed != "" {
		t.Errorf("trimmed = %q, want none without a prefill", trimmed)
	}
	jsonEqual(t, got, `{
		"model": "claude-x", "system": "Be brief.\n\nUse tools.", "max_tokens": 200,
		"stop_sequences": ["END"], "temperature": 0.5, "top_p": 0.9, "stream": true,
		"metadata": {"user_id": "u1"},
		"messages": [
			{"role": "user", "content": [{"type": "text", "text": "Weather?"},
				{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}}]},
			{"role": "assistant", "content": [{"type": "text", "text": "Let me look."},
				{"type": "tool_use", "id": "call_1", "name": "weather", "input": {"city": "Oslo"}},
				{"type": "tool_use", "id": "call_2", "name": "time", "input": {}}]},
			{"role": "user", "content": [
				{"type": "tool_result", "tool_use_id": "call_1", "content": [{"type": "text", "text": "rain"}]},
				{"type": "tool_result", "tool_use_id": "call_2"},
				{"type": "text", "text": "Thanks"}]}
		],
		"tools": [{"name": "weather", "description": "Weather of a city",
			"input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}},
			{"name": "time", "input_schema": {"type": "object", "properties": {}}}],
		"tool_choice": {"type": "any", "disable_parallel_tool_use": true}
	}`)
}

func TestFromChatDefaults(t *testing.T) {
	got, _ := roundTrip(t, `{"model": "m", "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": null}],
		"tool_choice": {"type": "function", "function": {"name": "f"}}, "tools": [{"type": "function", "function": {"name": "f"}}]}`)
	if got["max_tokens"] != float64(DefaultMaxTokens) {
		t.Errorf("max_tokens = %v, want the default %d", got["max_tokens"], DefaultMaxTokens)
	}
	jsonEqual(t, got["tool_choice"], `{"type": "tool", "name": "f"}`)
	jsonEqual(t, got["messages"], `[{"role": "user", "content": [{"type": "text", "text": "hi"}]}]`)
	if got["stream"] != true {
		t.Errorf("stream = %v, want true", got["stream"])
	}
}

// TestFromChatThinking: extra's fields come after the defaults, so its
// messages replace the default conversation (the last key wins).
func TestFromChatThinking(t *testing.T) {
	for _, tc := range []struct {
		effort, extra string
		want          string
	}{
		{effort: "high", want: `{"type": "enabled", "budget_tokens": 2048}`}, // half the default max_tokens
		{effort: "medium", extra: `"max_completion_tokens": 20000,`, want: `{"type": "enabled", "budget_tokens": 4096}`},
		{effort: "low", extra: `"max_tokens": 1500,`, want: `null`}, // no room for the minimum budget
		{effort: "", want: `null`},
		{effort: "high", extra: `"tool_choice": "required", "tools": [{"type": "function", "function": {"name": "f"}}],`, want: `null`},
		{effort: "high", extra: `"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "tool_calls": [{"id": "c", "function": {"name": "f"}}]},
			{"role": "tool", "tool_call_id": "c", "content": "ok"}],`, want: `null`},
	} {
		got, _ := roundTrip(t, `{"model": "m", "messages": [{"role": "user", "content": "hi"}], "temperature": 0.3, `+tc.extra+` "reasoning_effort": "`+tc.effort+`"}`)
		jsonEqual(t, got["thinking"], tc.want)
		if _, ok := got["temperature"]; ok == (tc.want != "null") {
			t.Errorf("effort %q: temperature %v, want it only without thinking", tc.effort, got["temperature"])
		}
	}
}

func TestFromChatPrefillWhitespace(t *testing.T) {
	tests := []struct {
		name, prefill string
		wantMessages  string
		wantTrimmed   string
	}{
		{
			name: "no trailing whitespace", prefill: "Hello",
			wantMessages: `[{"role":"user","content":[{"type":"text","text":"Say hi"}]},{"role":"assistant","content":[{"type":"text","text":"Hello"}]}]`,
		},
		{
			name: "trailing space and newlines", prefill: "Hello, \n\n",
			wantMessages: `[{"role":"user","content":[{"type":"text","text":"Say hi"}]},{"role":"assistant","content":[{"type":"text","text":"Hello,"}]}]`,
			wantTrimmed:  " \n\n",
		},
		{
			name: "only whitespace", prefill: " \u3000",
			wantMessages: `[{"role":"user","content":[{"type":"text","text":"Say hi"}]}]`,
			wantTrimmed:  " \u3000",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			chat, _ := json.Marshal(map[string]any{"model": "m", "messages": []map[string]string{
				{"role": "user", "content": "Say hi"}, {"role": "assistant", "content": tc.prefill}}})
			got, trimmed := roundTrip(t, string(chat))
			jsonEqual(t, got["messages"], tc.wantMessages)
			if trimmed != tc.wantTrimmed {
				t.Errorf("trimmed = %q, want %q", trimmed, tc.wantTrimmed)
			}
		})
	}
}

func TestFromChatUntranslatable(t *testing.T) {
	for name, chat := range map[string]string{
		"unknown role":        `{"model":"m","messages":[{"role":"function","content":"x"}]}`,
		"audio part":          `{"model":"m","messages":[{"role":"user","content":[{"type":"input_audio"}]}]}`,
		"arguments not JSON":  `{"model":"m","messages":[{"role":"assistant","tool_calls":[{"id":"c","function":{"name":"f","arguments":"[1"}}]}]}`,
		"image in system":     `{"model":"m","messages":[{"role":"system","content":[{"type":"image_url"}]}]}`,
		"non-function tool":   `{"model":"m","messages":[],"tools":[{"type":"custom"}]}`,
		"unknown tool_choice": `{"model":"m","messages":[],"tool_choice":"sometimes"}`,
	} {
		t.Run(name, func(t *testing.T) {
			if _, _, err := FromChat([]byte(chat)); err == nil {
				t.Fatal("FromChat succeeded, want an error")
			}
		})
	}
}
