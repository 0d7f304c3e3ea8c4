package upstream

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/relaydev/relay/relay/dialect/chat"
	"github.com/relaydev/relay/relay/wire"
)

// anthropicEvents renders Messages stream events as Anthropic sends them:
// an event line naming the type, and the data.
func anthropicEvents(datas ...string) string {
	var b strings.Builder
	for _, d := range datas {
		var typ struct{ Type string }
		_ = json.Unmarshal([]byte(d), &typ)
		b.WriteString("event: " + typ.Type + "\ndata: " + d + "\n\n")
	}
	return b.String()
}

// collect reads a stream to its end and returns the merged chat.Delta fields.
type collected struct {
	role, content, reasoning, finish, model string
	toolCalls                               []string
	usage                                   *chat.Usage
}

func collect(t *testing.T, s *Stream) (collected, error) {
	t.Helper()
	var c collected
	for {
		d, err := s.Next()
		if err != nil {
			return c, err
		}
		c.role += d.Role
		c.content += d.Content
		c.reasoning += d.Reasoning
		c.finish += d.FinishReason
		c.model += d.Model
		if d.ToolCalls != nil {
			c.toolCalls = append(c.toolCalls, string(d.ToolCalls))
		}
		if d.Usage != nil {
			c.usage = d.Usage
		}
	}
}

func openAnthropic(t *testing.T, srv string, body string) *Stream {
	t.Helper()
	s, err := NewClient(nil).Stream(t.Context(), Target{Provider: "claude", BaseURL: srv, APIKey: "sk-ant", Dialect: DialectAnthropic}, []byte(body))
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

const chatHi = `{"model":"claude-x","messages":[{"role":"user","content":"hi"}],"stream":true}`

func TestAnthropicStreamRequest(t *testing.T) {
	var got *http.Request
	var body []byte
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		got, body = r, readBody(r)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, anthropicEvents(
			`{"type":"message_start","message":{"model":"claude-x","usage":{"input_tokens":3,"output_tokens":1}}}`,
			`{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":1}}`,
			`{"type":"message_stop"}`))
	})
	s := openAnthropic(t, srv.URL+"/v1/", chatHi)
	if _, err := collect(t, s); err != io.EOF {
		t.Fatalf("Next = %v, want io.EOF", err)
	}
	if got.URL.Path != "/v1/messages" {
		t.Errorf("path = %q, want /v1/messages", got.URL.Path)
	}
	for h, want := range map[string]string{"x-api-key": "sk-ant", "anthropic-version": AnthropicVersion, "Authorization": "", "Accept": "text/event-stream"} {
		if v := got.Header.Get(h); v != want {
			t.Errorf("header %s = %q, want %q", h, v, want)
		}
	}
	var req anthropicRequest
	if err := json.Unmarshal(body, &req); err != nil || !req.Stream || req.Messages[0].Content[0].Text != "hi" {
		t.Errorf("body = %s (%v), want a streaming Messages request", body, err)
	}
}

func TestAnthropicStreamEvents(t *testing.T) {
	srv := sseServer(t, anthropicEvents(
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
	))
	s := openAnthropic(t, srv.URL, chatHi)
	c, err := collect(t, s)
	if err != io.EOF || !s.SawDone() {
		t.Fatalf("Next = %v (SawDone %v), want io.EOF after message_stop", err, s.SawDone())
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

func TestAnthropicFinishReasons(t *testing.T) {
	for reason, want := range map[string]string{
		"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length", "tool_use": "tool_calls",
		"refusal": "content_filter", "pause_turn": "length", "some_future_reason": "length",
	} {
		if got := anthropicFinish(reason); got != want {
			t.Errorf("anthropicFinish(%q) = %q, want %q", reason, got, want)
		}
	}
}

func TestAnthropicStreamEnds(t *testing.T) {
	start := `{"type":"message_start","message":{"model":"m","usage":{"input_tokens":1}}}`
	text := `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hel"}}`
	tests := []struct {
		name   string
		events string
		want   error
		class  Class
	}{
		{name: "body ends mid-answer", events: anthropicEvents(start, text), want: ErrTruncated, class: Transient},
		{name: "message_stop without a stop reason", events: anthropicEvents(start, text, `{"type":"message_stop"}`), want: ErrTruncated, class: Transient},
		{
			name:   "overloaded mid-stream",
			events: anthropicEvents(start, text, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`),
			want:   &chat.Error{}, class: Transient,
		},
		{
			name:   "invalid request mid-stream",
			events: anthropicEvents(start, `{"type":"error","error":{"type":"invalid_request_error","message":"bad"}}`),
			want:   &chat.Error{}, class: RequestFault,
		},
		{name: "not JSON", events: "event: message_start\ndata: {\n\n", want: ErrMalformed, class: Transient},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := openAnthropic(t, sseServer(t, tc.events).URL, chatHi)
			c, err := collect(t, s)
			if oe := (*chat.Error)(nil); errors.As(tc.want, &oe) {
				if !errors.As(err, &oe) {
					t.Fatalf("Next = %v, want an *chat.Error", err)
				}
			} else {
				wantErr(t, err, tc.want)
			}
			if Classify(err) != tc.class {
				t.Errorf("Classify = %v, want %v", Classify(err), tc.class)
			}
			if c.finish != "" {
				t.Errorf("finish = %q on a stream that did not end", c.finish)
			}
		})
	}
}

func TestAnthropicStatusErrors(t *testing.T) {
	tests := []struct {
		status     int
		body       string
		header     string
		class      Class
		msg, typ   string
		retryAfter time.Duration
	}{
		{status: 429, header: "7", body: `{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`, class: Transient, msg: "slow down", typ: "rate_limit_error", retryAfter: 7 * time.Second},
		{status: 529, body: `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, class: Transient, msg: "Overloaded", typ: "overloaded_error"},
		{status: 400, body: `{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: too large"}}`, class: RequestFault, msg: "max_tokens: too large", typ: "invalid_request_error"},
		{status: 401, body: `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`, class: Credential, msg: "invalid x-api-key", typ: "authentication_error"},
	}
	for _, tc := range tests {
		t.Run(tc.typ, func(t *testing.T) {
			srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				if tc.header != "" {
					w.Header().Set("Retry-After", tc.header)
				}
				w.WriteHeader(tc.status)
				_, _ = io.WriteString(w, tc.body)
			})
			_, err := NewClient(nil).Stream(t.Context(), Target{Provider: "claude", BaseURL: srv.URL, Dialect: DialectAnthropic}, []byte(chatHi))
			var se *StatusError
			if !errors.As(err, &se) {
				t.Fatalf("Stream = %v, want a *StatusError", err)
			}
			if se.Status != tc.status || se.Err.Message != tc.msg || se.Err.Type != tc.typ || se.RetryAfter != tc.retryAfter {
				t.Errorf("StatusError = status %d, %+v, retry after %v", se.Status, se.Err, se.RetryAfter)
			}
			if Classify(err) != tc.class {
				t.Errorf("Classify = %v, want %v", Classify(err), tc.class)
			}
		})
	}
}

func TestAnthropicPrefillContinuation(t *testing.T) {
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
			var got []byte
			events := []string{`{"type":"message_start","message":{"model":"m","usage":{"input_tokens":1}}}`,
				`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`}
			for _, d := range tc.deltas {
				b, _ := json.Marshal(map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]string{"type": "text_delta", "text": d}})
				events = append(events, string(b))
			}
			events = append(events, `{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":2}}`, `{"type":"message_stop"}`)
			srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
				got = readBody(r)
				w.Header().Set("Content-Type", "text/event-stream")
				_, _ = io.WriteString(w, anthropicEvents(events...))
			})
			chat, _ := json.Marshal(map[string]any{"model": "m", "messages": []map[string]string{
				{"role": "user", "content": "Say hi"}, {"role": "assistant", "content": tc.prefill}}})
			c, err := collect(t, openAnthropic(t, srv.URL, string(chat)))
			if err != io.EOF {
				t.Fatalf("Next = %v, want io.EOF", err)
			}
			if c.content != tc.want {
				t.Errorf("continuation = %q, want %q", c.content, tc.want)
			}
			var req anthropicRequest
			_ = json.Unmarshal(got, &req)
			last := req.Messages[len(req.Messages)-1]
			if text := last.Content[len(last.Content)-1].Text; strings.TrimSpace(text) != text {
				t.Errorf("prefill sent = %q, with trailing whitespace Anthropic refuses", text)
			}
		})
	}
}

// readBody reads a request's body in a handler.
func readBody(r *http.Request) []byte {
	b, _ := io.ReadAll(r.Body)
	return b
}
