package chat

import (
	"errors"
	"reflect"
	"testing"

	"github.com/relaydev/relay/relay/wire"
)

func TestParseChunk(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want Delta
	}{
		{
			name: "role",
			in:   `{"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-x","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}`,
			want: Delta{Role: "assistant", Model: "gpt-x"},
		},
		{
			name: "content",
			in:   `{"model":"m","choices":[{"index":0,"delta":{"content":"Hel\u006co 世界"},"finish_reason":null}]}`,
			want: Delta{Content: "Hello 世界", Model: "m"},
		},
		{
			name: "finish",
			in:   `{"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null}`,
			want: Delta{FinishReason: "stop", Model: "m"},
		},
		{
			name: "usage only",
			in:   `{"model":"m","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":5,"total_tokens":8}}`,
			want: Delta{Model: "m", Usage: &Usage{PromptTokens: 3, CompletionTokens: 5, TotalTokens: 8}},
		},
		{
			name: "tool calls",
			in:   `{"choices":[{"index":0,"delta":{"content":null,"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":""}}]}}]}`,
			want: Delta{ToolCalls: []byte(`[{"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":""}}]`)},
		},
		{
			name: "null and empty tool calls",
			in:   `{"choices":[{"index":0,"delta":{"content":"a","tool_calls":null}},{"index":1,"delta":{"tool_calls":[]}}]}`,
			want: Delta{Content: "a"},
		},
		{
			name: "choice 0 is not first",
			in:   `{"choices":[{"index":1,"delta":{"content":"one"}},{"index":0,"delta":{"content":"zero"}}]}`,
			want: Delta{Content: "zero"},
		},
		{
			name: "no choice 0",
			in:   `{"choices":[{"index":2,"delta":{"content":"two"}}]}`,
			want: Delta{},
		},
		{
			name: "content parts",
			in:   `{"choices":[{"index":0,"delta":{"content":[{"type":"thinking","thinking":[]},{"type":"text","text":"a"},{"type":"text","text":"b"}]}}]}`,
			want: Delta{Content: "ab"},
		},
		{
			name: "error null is no error",
			in:   `{"error":null,"choices":[{"index":0,"delta":{"content":"x"}}]}`,
			want: Delta{Content: "x"},
		},
		{name: "empty object", in: ` {} `, want: Delta{}},
		{
			name: "members the relay writes itself",
			in:   `{"id":"x","created":1,"obfuscation":"pad","relay":{"seq":3},"choices":[{"index":0,"delta":{"content":"a"}}]}`,
			want: Delta{Content: "a"},
		},
		{
			name: "reasoning_content",
			in:   `{"choices":[{"index":0,"delta":{"content":null,"reasoning_content":"think"}}]}`,
			want: Delta{Reasoning: "think"},
		},
		{
			name: "openrouter reasoning",
			in:   `{"choices":[{"index":0,"delta":{"content":"","reasoning":"hm","reasoning_details":[{"type":"reasoning.text","text":"hm"}]}}]}`,
			want: Delta{Reasoning: "hm", DeltaExtra: []Field{{"reasoning_details", []byte(`[{"type":"reasoning.text","text":"hm"}]`)}}},
		},
		{
			name: "reasoning_content wins over reasoning",
			in:   `{"choices":[{"index":0,"delta":{"reasoning_content":"a","reasoning":"b"}}]}`,
			want: Delta{Reasoning: "a"},
		},
		{
			name: "reasoning that is not text is kept raw",
			in:   `{"choices":[{"index":0,"delta":{"reasoning":{"effort":"low"}}}]}`,
			want: Delta{DeltaExtra: []Field{{"reasoning", []byte(`{"effort":"low"}`)}}},
		},
		{
			name: "refusal and logprobs",
			in:   `{"choices":[{"index":0,"delta":{"refusal":"No."},"logprobs":{"content":null,"refusal":[{"token":"No","logprob":-1,"bytes":[78,111],"top_logprobs":[]}]}}]}`,
			want: Delta{Refusal: "No.", Logprobs: []byte(`{"content":null,"refusal":[{"token":"No","logprob":-1,"bytes":[78,111],"top_logprobs":[]}]}`)},
		},
		{
			name: "escapes, invalid UTF-8 and an escaped unknown name",
			in:   "{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\\\"b\\u00e9\xff\"}}],\"x\\u0079\":[1, {\"z\":\",\"}]}",
			want: Delta{Content: "a\"b\u00e9\ufffd", ChunkExtra: []Field{{"xy", []byte(`[1, {"z":","}]`)}}},
		},
		{
			name: "usage details",
			in:   `{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":5,"total_tokens":8,"prompt_tokens_details":{"cached_tokens":2},"completion_tokens_details":{"reasoning_tokens":4,"new_tokens":1,"note":"x"}}}`,
			want: Delta{Usage: &Usage{PromptTokens: 3, CompletionTokens: 5, TotalTokens: 8,
				PromptTokensDetails:     wire.TokenCounts{{Name: "cached_tokens", N: 2}},
				CompletionTokensDetails: wire.TokenCounts{{Name: "reasoning_tokens", N: 4}, {Name: "new_tokens", N: 1}}}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseChunk([]byte(tc.in))
			if err != nil {
				t.Fatalf("ParseChunk: %v", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("ParseChunk =\n %+v\nwant\n %+v", got, tc.want)
			}
		})
	}
}

func TestParseChunkMalformed(t *testing.T) {
	for _, in := range []string{
		``,
		`   `,
		`null`,
		`[]`,
		`"text"`,
		`{"choices":[{"index":0,"delta":{"content":"x"}`,
		`{"choices":"none"}`,
		`{"choices":[{"index":0,"delta":{"content":5}}]}`,
		`{"choices":[{"index":0,"delta":{"content":[{"type":"text","text":5}]}}]}`,
		`{"usage":{"prompt_tokens":"3"}}`,
		`{"error":5}`,
		`data: {}`,
	} {
		_, err := ParseChunk([]byte(in))
		if !errors.Is(err, ErrMalformed) {
			t.Errorf("ParseChunk(%q) = %v, want ErrMalformed", in, err)
		}
	}
}

func TestParseChunkErrorPayload(t *testing.T) {
	tests := []struct {
		in   string
		want Error
	}{
		{
			in:   `{"error":{"message":"The server had an error","type":"server_error","param":null,"code":null}}`,
			want: Error{Message: "The server had an error", Type: "server_error"},
		},
		{
			in:   `{"error":{"message":"overloaded","type":"overloaded_error","code":529}}`,
			want: Error{Message: "overloaded", Type: "overloaded_error", Code: "529"},
		},
		{in: `{"error":"upstream timed out"}`, want: Error{Message: "upstream timed out"}},
		{
			in:   `{"object":"error","message":"boom","type":"InternalServerError","param":null,"code":500}`,
			want: Error{Message: "boom", Type: "InternalServerError", Code: "500"},
		},
		{
			in:   `{"error":{"message":["a","b"],"param":{"x":1}}}`,
			want: Error{Message: `["a","b"]`, Param: `{"x":1}`},
		},
	}
	for _, tc := range tests {
		_, err := ParseChunk([]byte(tc.in))
		var oe *Error
		if !errors.As(err, &oe) {
			t.Fatalf("ParseChunk(%s) = %v, want an *Error", tc.in, err)
		}
		if *oe != tc.want {
			t.Errorf("ParseChunk(%s) error = %+v, want %+v", tc.in, *oe, tc.want)
		}
		if errors.Is(err, ErrMalformed) {
			t.Errorf("ParseChunk(%s) = %v: an error payload is not malformed", tc.in, err)
		}
	}
}

func TestParseErrorBody(t *testing.T) {
	tests := []struct {
		in   string
		want Error
		ok   bool
	}{
		{
			in:   `{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`,
			want: Error{Message: "Incorrect API key provided", Type: "invalid_request_error", Code: "invalid_api_key"},
			ok:   true,
		},
		{in: `{"error":"rate limited"}`, want: Error{Message: "rate limited"}, ok: true},
		{in: `{"object":"error","message":"bad","code":400}`, want: Error{Message: "bad", Code: "400"}, ok: true},
		{in: `{"detail":"Not Found"}`},
		{in: `{"error":null}`},
		{in: `<html>502 Bad Gateway</html>`},
		{in: ``},
	}
	for _, tc := range tests {
		got, ok := ParseErrorBody([]byte(tc.in))
		if got != tc.want || ok != tc.ok {
			t.Errorf("ParseErrorBody(%s) = %+v, %v; want %+v, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestOpenAIErrorMessage(t *testing.T) {
	tests := []struct {
		e    Error
		want string
	}{
		{Error{}, "provider error"},
		{Error{Message: "slow down", Type: "requests", Code: "rate_limit_exceeded"}, "slow down (type requests) (code rate_limit_exceeded)"},
	}
	for _, tc := range tests {
		if got := tc.e.Error(); got != tc.want {
			t.Errorf("Error() = %q, want %q", got, tc.want)
		}
	}
}

// FuzzParseChunk checks that any data either decodes or fails with
// ErrMalformed or a provider error, and never panics.
func FuzzParseChunk(f *testing.F) {
	f.Add([]byte(`{"id":"c1","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}]}`))
	f.Add([]byte(`{"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}`))
	f.Add([]byte(`{"error":{"message":"m","code":1}}`))
	f.Add([]byte(`{"object":"error","message":"m"}`))
	f.Add([]byte(`{"choices":[{"index":0,"delta":{"content":[{"type":"text","text":"a"}]}}]}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		_, err := ParseChunk(in)
		var oe *Error
		if err != nil && !errors.Is(err, ErrMalformed) && !errors.As(err, &oe) {
			t.Fatalf("ParseChunk(%q) = %v: neither malformed nor a provider error", in, err)
		}
	})
}
