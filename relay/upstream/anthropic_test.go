package upstream

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/relaydev/relay/relay/dialect/anthropic"
	"github.com/relaydev/relay/relay/dialect/chat"
)

// The Anthropic dialect's translation and decoder are relay/dialect/anthropic's
// and tested there; these tests are of the client around them: the call,
// its headers, the end of its stream and the classification of its errors.

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
	if _, err := collect(t, s); err != io.EOF || !s.SawDone() {
		t.Fatalf("Next = %v (SawDone %v), want io.EOF after message_stop", err, s.SawDone())
	}
	if got.URL.Path != "/v1/messages" {
		t.Errorf("path = %q, want /v1/messages", got.URL.Path)
	}
	for h, want := range map[string]string{"x-api-key": "sk-ant", "anthropic-version": anthropic.Version, "Authorization": "", "Accept": "text/event-stream"} {
		if v := got.Header.Get(h); v != want {
			t.Errorf("header %s = %q, want %q", h, v, want)
		}
	}
	var req anthropic.Request
	if err := json.Unmarshal(body, &req); err != nil || !req.Stream || req.Messages[0].Content[0].Text != "hi" {
		t.Errorf("body = %s (%v), want a streaming Messages request", body, err)
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

func TestStreamUntranslatableIsRequestFault(t *testing.T) {
	srv := sseServer(t)
	_, err := NewClient(nil).Stream(t.Context(), Target{Provider: "p", BaseURL: srv.URL, Dialect: DialectAnthropic},
		[]byte(`{"model":"m","messages":[{"role":"function","content":"x"}]}`))
	if !errors.Is(err, ErrUntranslatable) || Classify(err) != RequestFault {
		t.Fatalf("Stream error = %v (class %v), want ErrUntranslatable, a RequestFault", err, Classify(err))
	}
}

// readBody reads a request's body in a handler.
func readBody(r *http.Request) []byte {
	b, _ := io.ReadAll(r.Body)
	return b
}
