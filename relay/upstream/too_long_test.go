package upstream

import (
	"errors"
	"fmt"
	"github.com/relaydev/relay/relay/dialect/chat"
	"testing"
)

func TestTooLongRecognisesTheProvidersShapes(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		body   string
		ok     bool
		needed int
	}{
		{"openai", 400, `{"error":{"message":"This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`, true, 9000},
		{"openai completion counted", 400, `{"error":{"message":"This model's maximum context length is 4097 tokens, however you requested 5000 tokens (4000 in your prompt; 1000 for the completion).","type":"invalid_request_error","code":"context_length_exceeded"}}`, true, 5000},
		{"vllm", 400, `{"object":"error","message":"This model's maximum context length is 4096 tokens. However, you requested 6000 tokens (5000 in the messages, 1000 in the completion).","type":"BadRequestError","code":400}`, true, 6000},
		{"llama.cpp", 400, `{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error"}}`, true, 0},
		{"anthropic prompt", 400, `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 208310 tokens > 200000 maximum"}}`, true, 208310},
		{"anthropic with max_tokens", 400, `{"type":"error","error":{"type":"invalid_request_error","message":"input length and ` + "`max_tokens`" + ` exceed context limit: 197626 + 21333 > 200000, decrease input length or ` + "`max_tokens`" + ` and try again"}}`, true, 218959},
		{"content filter", 400, `{"error":{"message":"The response was filtered due to the prompt triggering content management policy.","type":"invalid_request_error","code":"content_filter"}}`, false, 0},
		{"bad parameter", 400, `{"error":{"message":"Invalid value for 'temperature'.","type":"invalid_request_error","param":"temperature"}}`, false, 0},
		{"server error saying so", 500, `{"error":{"message":"maximum context length exceeded upstream","type":"server_error"}}`, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, _ := chat.ParseErrorBody([]byte(tc.body))
			err := fmt.Errorf("call: %w", &StatusError{Provider: "p", Status: tc.status, Body: []byte(tc.body), Err: e})
			needed, ok := TooLong(err)
			if ok != tc.ok || needed != tc.needed {
				t.Fatalf("TooLong = %d, %v; want %d, %v", needed, ok, tc.needed, tc.ok)
			}
		})
	}
}

func TestTooLongMidStream(t *testing.T) {
	err := fmt.Errorf("chunk: %w", &chat.Error{Message: "too long", Type: "invalid_request_error", Code: "context_length_exceeded"})
	if _, ok := TooLong(err); !ok {
		t.Fatal("an error chunk with code context_length_exceeded is not recognised")
	}
	if _, ok := TooLong(errors.New("maximum context length")); ok {
		t.Fatal("an error that is not the provider's answer is recognised")
	}
}
