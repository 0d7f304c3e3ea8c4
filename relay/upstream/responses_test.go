package upstream

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/relaydev/relay/relay/dialect/chat"
	"github.com/relaydev/relay/relay/wire"
)

// responsesEvents renders Responses stream events with their sequence
// numbers, as OpenAI sends them.
func responsesEvents(datas ...string) string {
	var b strings.Builder
	for i, d := range datas {
		var typ struct{ Type string }
		_ = json.Unmarshal([]byte(d), &typ)
		d = strings.Replace(d, "{", fmt.Sprintf(`{"sequence_number":%d,`, i), 1)
		b.WriteString("event: " + typ.Type + "\ndata: " + d + "\n\n")
	}
	return b.String()
}

func openResponses(t *testing.T, srv string) *Stream {
	t.Helper()
	s, err := NewClient(nil).Stream(t.Context(), Target{Provider: "oai", BaseURL: srv, APIKey: "sk", Dialect: DialectResponses}, []byte(chatHi))
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestResponsesStreamEvents(t *testing.T) {
	var path, auth string
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		path, auth = r.URL.Path, r.Header.Get("Authorization")
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, responsesEvents(
			`{"type":"response.created","response":{"id":"resp_1","model":"gpt-x","status":"in_progress"}}`,
			`{"type":"response.in_progress","response":{"id":"resp_1","model":"gpt-x","status":"in_progress"}}`,
			`{"type":"response.output_item.added","output_index":0,"item":{"type":"reasoning","id":"rs_1"}}`,
			`{"type":"response.reasoning_summary_text.delta","item_id":"rs_1","output_index":0,"delta":"Thinking"}`,
			`{"type":"response.output_item.added","output_index":1,"item":{"type":"message","id":"msg_1"}}`,
			`{"type":"response.output_text.delta","item_id":"msg_1","output_index":1,"delta":"Hello, "}`,
			`{"type":"response.output_text.delta","item_id":"msg_1","output_index":1,"delta":"世界"}`,
			`{"type":"response.output_item.added","output_index":2,"item":{"type":"function_call","id":"fc_1","call_id":"call_1","name":"weather","arguments":""}}`,
			`{"type":"response.function_call_arguments.delta","item_id":"fc_1","output_index":2,"delta":"{\"city\":"}`,
			`{"type":"response.function_call_arguments.delta","item_id":"fc_1","output_index":2,"delta":"\"Oslo\"}"}`,
			`{"type":"response.output_item.done","output_index":2,"item":{"type":"function_call","id":"fc_1","call_id":"call_1","name":"weather","arguments":"{\"city\":\"Oslo\"}"}}`,
			`{"type":"response.output_item.added","output_index":3,"item":{"type":"function_call","id":"fc_2","call_id":"call_2","name":"time","arguments":""}}`,
			`{"type":"response.output_item.done","output_index":3,"item":{"type":"function_call","id":"fc_2","call_id":"call_2","name":"time","arguments":"{}"}}`,
			`{"type":"response.completed","response":{"id":"resp_1","model":"gpt-x","status":"completed","usage":{"input_tokens":9,"input_tokens_details":{"cached_tokens":4},"output_tokens":12,"output_tokens_details":{"reasoning_tokens":5},"total_tokens":21}}}`,
		))
	})
	s := openResponses(t, srv.URL+"/v1")
	c, err := collect(t, s)
	if err != io.EOF {
		t.Fatalf("Next = %v, want io.EOF", err)
	}
	if path != "/v1/responses" || auth != "Bearer sk" {
		t.Errorf("request to %s with Authorization %q", path, auth)
	}
	if c.role != "assistant" || c.content != "Hello, 世界" || c.reasoning != "Thinking" || c.finish != "tool_calls" {
		t.Errorf("got %+v", c)
	}
	wantTools := []string{
		`[{"index":0,"id":"call_1","type":"function","function":{"name":"weather","arguments":""}}]`,
		`[{"index":0,"function":{"arguments":"{\"city\":"}}]`,
		`[{"index":0,"function":{"arguments":"\"Oslo\"}"}}]`,
		`[{"index":1,"id":"call_2","type":"function","function":{"name":"time","arguments":""}}]`,
		`[{"index":1,"function":{"arguments":"{}"}}]`,
	}
	if strings.Join(c.toolCalls, "\n") != strings.Join(wantTools, "\n") {
		t.Errorf("tool_calls fragments:\n%s\nwant\n%s", strings.Join(c.toolCalls, "\n"), strings.Join(wantTools, "\n"))
	}
	// The cache and reasoning counts are kept as chat's details, where a
	// Responses edge (or any other) reads them back.
	want := chat.Usage{PromptTokens: 9, CompletionTokens: 12, TotalTokens: 21,
		PromptTokensDetails:     wire.TokenCounts{{Name: "cached_tokens", N: 4}},
		CompletionTokensDetails: wire.TokenCounts{{Name: "reasoning_tokens", N: 5}}}
	if c.usage == nil || !reflect.DeepEqual(*c.usage, want) {
		t.Errorf("usage = %+v, want %+v", c.usage, want)
	}
}

func TestResponsesStreamEnds(t *testing.T) {
	created := `{"type":"response.created","response":{"id":"r","model":"m"}}`
	text := `{"type":"response.output_text.delta","item_id":"i","delta":"Hel"}`
	tests := []struct {
		name       string
		events     string
		wantFinish string
		wantErr    bool
		class      Class
	}{
		{name: "incomplete at max_output_tokens", wantFinish: "length",
			events: responsesEvents(created, text, `{"type":"response.incomplete","response":{"status":"incomplete","incomplete_details":{"reason":"max_output_tokens"}}}`)},
		{name: "incomplete by content filter", wantFinish: "content_filter",
			events: responsesEvents(created, text, `{"type":"response.incomplete","response":{"status":"incomplete","incomplete_details":{"reason":"content_filter"}}}`)},
		{name: "failed", wantErr: true, class: Transient,
			events: responsesEvents(created, text, `{"type":"response.failed","response":{"status":"failed","error":{"code":"server_error","message":"boom"}}}`)},
		{name: "error event", wantErr: true, class: Transient,
			events: responsesEvents(created, `{"type":"error","code":"rate_limit_exceeded","message":"slow down","param":null}`)},
		{name: "failed for the prompt", wantErr: true, class: RequestFault,
			events: responsesEvents(created, `{"type":"response.failed","response":{"status":"failed","error":{"code":"invalid_prompt","message":"no"}}}`)},
		{name: "cut", wantErr: true, class: Transient, events: responsesEvents(created, text)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := collect(t, openResponses(t, sseServer(t, tc.events).URL))
			if !tc.wantErr {
				if err != io.EOF || c.finish != tc.wantFinish {
					t.Fatalf("Next = %v, finish %q; want io.EOF, finish %q", err, c.finish, tc.wantFinish)
				}
				return
			}
			if err == io.EOF || c.finish != "" {
				t.Fatalf("Next = %v, finish %q; want an error and no finish", err, c.finish)
			}
			if Classify(err) != tc.class {
				t.Errorf("Classify(%v) = %v, want %v", err, Classify(err), tc.class)
			}
		})
	}
}
