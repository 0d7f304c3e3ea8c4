package anthropic

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/relaydev/relay/relay/dialect/chat"
	"github.com/relaydev/relay/relay/wire"
)

// anyModel serves every model.
func anyModel(string) *wire.Error { return nil }

// onlyM serves model m only.
func onlyM(model string) *wire.Error {
	if model != "m" {
		return &wire.Error{Message: "no such model", Param: "model", Status: http.StatusNotFound}
	}
	return nil
}

// toChatCases are the chat completion requests each kind of Messages
// request becomes.
var toChatCases = []struct {
	name, body, chat string
	stream           bool
}{
	{"a string, streamed",
		`{"model":"m","max_tokens":10,"stream":true,"messages":[{"role":"user","content":"hi"}]}`,
		`{"max_tokens":10,"messages":[{"role":"user","content":"hi"}],"model":"m"}`, true},
	{"system blocks, text blocks, sampling and metadata",
		`{"model":"m","max_tokens":5,"system":[{"type":"text","text":"be "},{"type":"text","text":"brief","cache_control":{"type":"ephemeral"}}],
			  "messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}],
			  "temperature":0.5,"top_p":0.9,"top_k":40,"stop_sequences":["END"],"metadata":{"user_id":"u1"},
			  "thinking":{"type":"enabled","budget_tokens":1024},"service_tier":"auto"}`,
		`{"max_tokens":5,"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"ab"}],"model":"m",
			  "stop":["END"],"temperature":0.5,"top_p":0.9,"user":"u1"}`, false},
	{"images inline and by URL",
		`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"text","text":"what?"},
			  {"type":"image","source":{"type":"base64","media_type":"image/png","data":"AAAA"}},
			  {"type":"image","source":{"type":"url","url":"https://example.com/a.jpg"}}]}]}`,
		`{"max_tokens":5,"messages":[{"role":"user","content":[{"type":"text","text":"what?"},
			  {"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}},{"type":"image_url","image_url":{"url":"https://example.com/a.jpg"}}]}],"model":"m"}`, false},
	{"a tool round trip",
		`{"model":"m","max_tokens":5,"tools":[{"name":"get_weather","description":"d","input_schema":{"type":"object"}}],
			  "tool_choice":{"type":"any","disable_parallel_tool_use":true},"messages":[
			  {"role":"user","content":"weather?"},
			  {"role":"assistant","content":[{"type":"thinking","thinking":"hm","signature":"s"},{"type":"text","text":"let me see"},
			    {"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city":"Paris"}}]},
			  {"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"sunny"}]},{"type":"text","text":"and?"}]}]}`,
		`{"max_tokens":5,"messages":[{"role":"user","content":"weather?"},
			  {"role":"assistant","content":"let me see","tool_calls":[{"id":"toolu_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},
			  {"role":"tool","content":"sunny","tool_call_id":"toolu_1"},{"role":"user","content":"and?"}],"model":"m",
			  "parallel_tool_calls":false,"tool_choice":"required",
			  "tools":[{"type":"function","function":{"name":"get_weather","description":"d","parameters":{"type":"object"}}}]}`, false},
	{"a tool by name; a call without text",
		`{"model":"m","max_tokens":5,"tool_choice":{"type":"tool","name":"f"},"messages":[{"role":"user","content":"x"},
			  {"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":{}}]},
			  {"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"done"}]}]}`,
		`{"max_tokens":5,"messages":[{"role":"user","content":"x"},
			  {"role":"assistant","content":null,"tool_calls":[{"id":"t","type":"function","function":{"name":"f","arguments":"{}"}}]},
			  {"role":"tool","content":"done","tool_call_id":"t"}],"model":"m","tool_choice":{"function":{"name":"f"},"type":"function"}}`, false},
	{"a prefill stays the last message",
		`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"count"},{"role":"assistant","content":"1, 2,"}]}`,
		`{"max_tokens":5,"messages":[{"role":"user","content":"count"},{"role":"assistant","content":"1, 2,"}],"model":"m"}`, false},
}

func TestToChat(t *testing.T) {
	for _, tc := range toChatCases {
		t.Run(tc.name, func(t *testing.T) {
			req, e := ToChat([]byte(tc.body), anyModel)
			if e != nil {
				t.Fatalf("refused: %+v", e)
			}
			var got any
			if err := json.Unmarshal(req.Body, &got); err != nil {
				t.Fatal(err)
			}
			jsonEqual(t, got, tc.chat)
			if req.Stream != tc.stream {
				t.Fatalf("stream %v", req.Stream)
			}
		})
	}
}

// TestToChatErrors: what the Messages API refuses, with the status and
// the parameter Anthropic's clients know; the model is checked first.
func TestToChatErrors(t *testing.T) {
	user := `"messages":[{"role":"user","content":"hi"}]`
	for _, tc := range []struct {
		name, body, param string
		status            int
	}{
		{"not JSON", `[1]`, "", http.StatusBadRequest},
		{"no max_tokens", `{"model":"m",` + user + `}`, "max_tokens", http.StatusBadRequest},
		{"unknown model", `{"model":"x","max_tokens":1,` + user + `}`, "model", http.StatusNotFound},
		{"unknown parameter", `{"model":"m","max_tokens":1,"frequency_penalty":1,` + user + `}`, "frequency_penalty", http.StatusBadRequest},
		{"temperature above 1", `{"model":"m","max_tokens":1,"temperature":1.5,` + user + `}`, "temperature", http.StatusBadRequest},
		{"an unknown model and no max_tokens", `{"model":"x",` + user + `}`, "model", http.StatusNotFound},
		{"stream not a boolean", `{"model":"m","max_tokens":1,"stream":1,` + user + `}`, "stream", http.StatusBadRequest},
		{"no messages", `{"model":"m","max_tokens":1,"messages":[]}`, "messages", http.StatusBadRequest},
		{"a system role", `{"model":"m","max_tokens":1,"messages":[{"role":"system","content":"a"}]}`, "messages.0.role", http.StatusBadRequest},
		{"a document", `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"document"}]}]}`, "messages.0.content.0.type", http.StatusBadRequest},
		{"an image without a source", `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"image"}]}]}`, "messages.0.content.0.source", http.StatusBadRequest},
		{"a server tool", `{"model":"m","max_tokens":1,"tools":[{"type":"web_search_20250305","name":"web_search"}],` + user + `}`, "tools.0.type", http.StatusBadRequest},
		{"a tool without schema", `{"model":"m","max_tokens":1,"tools":[{"name":"f"}],` + user + `}`, "tools.0.input_schema", http.StatusBadRequest},
		{"a bad tool_choice", `{"model":"m","max_tokens":1,"tool_choice":{"type":"required"},` + user + `}`, "tool_choice.type", http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, e := ToChat([]byte(tc.body), onlyM)
			if e == nil || e.Status != tc.status || e.Param != tc.param {
				t.Fatalf("error %+v, want status %d param %q", e, tc.status, tc.param)
			}
		})
	}
}

func TestErrorType(t *testing.T) {
	for status, want := range map[int]string{
		400: "invalid_request_error", 401: "authentication_error", 403: "permission_error", 404: "not_found_error",
		413: "request_too_large", 429: "rate_limit_error", 500: "api_error", 502: "api_error", 503: "overloaded_error", 529: "overloaded_error",
	} {
		if got := ErrorType(status); got != want {
			t.Errorf("status %d: %s, want %s", status, got, want)
		}
	}
}

// TestToChatRefusesBadTextAndImages: text that is not UTF-8 and images
// from anywhere but https: and image data are refused with a 400 naming
// the field as the Messages API names it.
func TestToChatRefusesBadTextAndImages(t *testing.T) {
	image := func(source string) string {
		return `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"text","text":"what?"},{"type":"image","source":` + source + `}]}]}`
	}
	url := func(u string) string { return image(`{"type":"url","url":"` + u + `"}`) }
	for _, tc := range []struct {
		name, body, param string
		refused           bool
	}{
		{"invalid UTF-8 in a message", "{\"model\":\"m\",\"max_tokens\":1,\"messages\":[{\"role\":\"user\",\"content\":\"hi\"},{\"role\":\"assistant\",\"content\":\"caf\xe9\"}]}", "messages.1.content", true},
		{"a lone high surrogate", `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"text","text":"\ud800"}]}]}`, "messages.0.content.0.text", true},
		{"a lone low surrogate", `{"model":"m","max_tokens":1,"system":"\udc00","messages":[{"role":"user","content":"hi"}]}`, "system", true},
		{"a valid pair", `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"\ud83d\ude00"}]}`, "", false},
		{"a file: image", url("file:///etc/passwd"), "messages.0.content.1.source.url", true},
		{"a javascript: image", url("javascript:alert(1)"), "messages.0.content.1.source.url", true},
		{"an http: image", url("http://10.0.0.1/a.png"), "messages.0.content.1.source.url", true},
		{"a data:text/html image", url("data:text/html,<script>x</script>"), "messages.0.content.1.source.url", true},
		{"base64 of text/html", image(`{"type":"base64","media_type":"text/html","data":"PHNjcmlwdD4="}`), "messages.0.content.1.source.media_type", true},
		{"base64 with a media type that ends a data: URL", image(`{"type":"base64","media_type":"image/png,x","data":"AAAA"}`), "messages.0.content.1.source.media_type", true},
		{"an https image", url("https://example.com/a.png"), "", false},
		{"a data:image/png image", url("data:image/png;base64,iVBORw0KGgo="), "", false},
		{"base64 of image/webp", image(`{"type":"base64","media_type":"image/webp","data":"UklGRg=="}`), "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, e := ToChat([]byte(tc.body), anyModel)
			if !tc.refused {
				if e != nil {
					t.Fatalf("refused: %+v", e)
				}
				if _, e := chat.CheckRequest(req.Body, chat.Limits{Served: func(string) bool { return true }, MaxMessages: -1, MaxTokens: -1}); e != nil {
					t.Fatalf("the chat request %s is refused: %+v", req.Body, e)
				}
				return
			}
			if e == nil || e.Status != http.StatusBadRequest || e.Code != chat.CodeInvalidValue || e.Type != "invalid_request_error" || e.Param != tc.param || e.Message == "" {
				t.Fatalf("error %+v, want a 400 invalid_value naming %q", e, tc.param)
			}
		})
	}
}
