package responses

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/relaydev/relay/relay/dialect/chat"
)

// FuzzDecoder: a provider's events come from outside. Decode never
// panics; an event yields a Delta or an error, never both; every
// tool_calls fragment is a JSON array; and an error is ErrNoDelta,
// ErrMalformed or the provider's own *chat.Error, which the upstream
// client classifies.
func FuzzDecoder(f *testing.F) {
	for _, s := range []string{
		`{"type":"response.created","response":{"model":"m"}}`,
		`{"type":"response.output_text.delta","delta":"hi"}`,
		`{"type":"response.output_item.added","output_index":1,"item":{"type":"function_call","call_id":"c","name":"f"}}`,
		`{"type":"response.function_call_arguments.delta","output_index":1,"delta":"{}"}`,
		`{"type":"response.output_item.done","output_index":1,"item":{"type":"function_call","arguments":"{}"}}`,
		`{"type":"response.incomplete","response":{"status":"incomplete","incomplete_details":{"reason":"content_filter"}}}`,
		`{"type":"response.failed","response":{"error":{"code":"invalid_prompt","message":"no"}}}`,
		`{"type":"error","code":"rate_limit_exceeded","message":"slow down"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		dec := NewDecoder()
		// Twice, so that state from the first event meets the second.
		for range 2 {
			d, err := dec.Decode("", data)
			var pe *chat.Error
			switch {
			case err == nil:
			case d.Content != "" || d.Reasoning != "" || d.ToolCalls != nil || d.FinishReason != "" || d.Usage != nil:
				t.Fatalf("Delta %+v with error %v", d, err)
			case !errors.Is(err, chat.ErrNoDelta) && !errors.Is(err, chat.ErrMalformed) && !errors.As(err, &pe):
				t.Fatalf("error %v is none the upstream client knows", err)
			}
			var frags []json.RawMessage
			if d.ToolCalls != nil && json.Unmarshal(d.ToolCalls, &frags) != nil {
				t.Fatalf("tool_calls %s is not a JSON array", d.ToolCalls)
			}
		}
	})
}

// An error of the Responses API has a code and no type: its invalid_
// codes are the request's fault, and say so as chat errors do.
func TestDecoderTypesErrors(t *testing.T) {
	for data, want := range map[string]string{
		`{"type":"response.failed","response":{"error":{"code":"invalid_prompt","message":"no"}}}`: "invalid_request_error",
		`{"type":"error","code":"server_error","message":"boom"}`:                                  "",
		`{"type":"response.failed","response":{"status":"failed"}}`:                                "server_error",
	} {
		_, err := NewDecoder().Decode("", []byte(data))
		var pe *chat.Error
		if !errors.As(err, &pe) || pe.Type != want {
			t.Errorf("%s: %v, want an error of type %q", data, err, want)
		}
	}
}
