package upstream

import (
	"encoding/json"
	"errors"
	"github.com/relaydev/relay/relay/dialect/anthropic"
	"github.com/relaydev/relay/relay/dialect/chat"
	"github.com/relaydev/relay/relay/dialect/responses"
	"io"
	"testing"
	"unicode/utf8"
)

// FuzzDialectDecoders feeds provider event data to the Anthropic and
// Responses decoders: they never panic, every tool_calls fragment is a
// JSON array, and what an event yields is a chat.Delta, a skip, the end, or an
// error, never a chat.Delta with an error.
func FuzzDialectDecoders(f *testing.F) {
	for _, s := range []string{
		`{"type":"message_start","message":{"model":"m","usage":{"input_tokens":3}}}`,
		`{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t","name":"f"}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"a\":"}}`,
		`{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"  hi"}}`,
		`{"type":"message_delta","delta":{"stop_reason":"max_tokens"},"usage":{"output_tokens":9}}`,
		`{"type":"error","error":{"type":"overloaded_error","message":"x"}}`,
		`{"type":"response.output_item.added","output_index":2,"item":{"type":"function_call","call_id":"c","name":"f"}}`,
		`{"type":"response.function_call_arguments.delta","output_index":2,"delta":"{}"}`,
		`{"type":"response.completed","response":{"status":"incomplete","usage":{"input_tokens":1}}}`,
		`{"type":"error","code":5,"message":{"x":1}}`,
	} {
		f.Add([]byte(s), " \n")
	}
	f.Fuzz(func(t *testing.T, data []byte, trimmed string) {
		if !utf8.ValidString(trimmed) {
			return
		}
		for _, dec := range []eventDecoder{anthropic.NewDecoder(trimmed), responses.NewDecoder()} {
			// Twice, so that state from the first event meets the second.
			for range 2 {
				d, err := dec.Decode("", data)
				if err != nil && (d.Content != "" || d.ToolCalls != nil || d.FinishReason != "") {
					t.Fatalf("Delta %+v with error %v", d, err)
				}
				if err != nil && !errors.Is(err, chat.ErrNoDelta) && !errors.Is(err, io.EOF) && Classify(err) == Canceled {
					t.Fatalf("error %v classified as a cancellation", err)
				}
				var frags []json.RawMessage
				if d.ToolCalls != nil && json.Unmarshal(d.ToolCalls, &frags) != nil {
					t.Fatalf("tool_calls %s is not a JSON array", d.ToolCalls)
				}
			}
		}
	})
}
