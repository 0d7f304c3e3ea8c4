package responses

import (
	"testing"

	"github.com/relaydev/relay/relay/dialect/chat"
	"github.com/relaydev/relay/relay/wire"
)

// anyModel is a caller that serves every model.
func anyModel(string) *wire.Error { return nil }

// TestResponsesRequestTranslation: what each Responses input becomes in
// the chat completion request the workers generate.
func TestResponsesRequestTranslation(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"string input", `{"model":"m","input":"hi","stream":true,"store":false}`,
			`{"messages":[{"role":"user","content":"hi"}],"model":"m"}`},
		{"instructions and parameters", `{"model":"m","instructions":"be brief","input":"hi","max_output_tokens":9,"temperature":0.5,"top_p":1,"user":"u","metadata":{"a":"b"}}`,
			`{"max_tokens":9,"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hi"}],"model":"m","temperature":0.5,"top_p":1,"user":"u"}`},
		{"message items (AI SDK)", `{"model":"m","input":[{"role":"developer","content":"sys"},{"role":"user","content":[{"type":"input_text","text":"hi"}]}]}`,
			`{"messages":[{"role":"system","content":"sys"},{"role":"user","content":"hi"}],"model":"m"}`},
		{"typed messages with parts (LangChain)", `{"model":"m","text":{},"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"a"},{"type":"input_image","image_url":"https://x/i.png"}]}]}`,
			`{"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"https://x/i.png"}}]}],"model":"m"}`},
		{"a tool round trip", `{"model":"m","input":[{"role":"user","content":"weather?"},` +
			`{"type":"message","role":"assistant","content":[{"type":"output_text","text":"checking"}]},` +
			`{"type":"function_call","call_id":"c1","name":"get","arguments":"{}"},{"type":"function_call","call_id":"c2","name":"put","arguments":"{}"},` +
			`{"type":"function_call_output","call_id":"c1","output":"sunny"},{"type":"function_call_output","call_id":"c2","output":"ok"}],` +
			`"tools":[{"type":"function","name":"get","parameters":{"type":"object"},"strict":true}],"tool_choice":{"type":"function","name":"get"},"parallel_tool_calls":false}`,
			`{"messages":[{"role":"user","content":"weather?"},{"role":"assistant","content":"checking","tool_calls":[` +
				`{"id":"c1","type":"function","function":{"name":"get","arguments":"{}"}},{"id":"c2","type":"function","function":{"name":"put","arguments":"{}"}}]},` +
				`{"role":"tool","content":"sunny","tool_call_id":"c1"},{"role":"tool","content":"ok","tool_call_id":"c2"}],"model":"m","parallel_tool_calls":false,` +
				`"tool_choice":{"function":{"name":"get"},"type":"function"},"tools":[{"type":"function","function":{"name":"get","parameters":{"type":"object"},"strict":true}}]}`},
		{"logprobs", `{"model":"m","input":"hi","top_logprobs":2,"include":["message.output_text.logprobs","reasoning.encrypted_content"]}`,
			`{"logprobs":true,"messages":[{"role":"user","content":"hi"}],"model":"m","top_logprobs":2}`},
		{"logprobs by include alone", `{"model":"m","input":"hi","include":["message.output_text.logprobs"]}`,
			`{"logprobs":true,"messages":[{"role":"user","content":"hi"}],"model":"m"}`},
		{"json schema output", `{"model":"m","input":"hi","text":{"format":{"type":"json_schema","name":"x","schema":{"type":"object"},"strict":true}}}`,
			`{"messages":[{"role":"user","content":"hi"}],"model":"m","response_format":{"json_schema":{"name":"x","schema":{"type":"object"},"strict":true},"type":"json_schema"}}`},
	} {
		req, e := ParseRequest([]byte(tc.in), anyModel)
		if e != nil {
			t.Errorf("%s: %+v", tc.name, e)
			continue
		}
		if string(req.Chat) != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, req.Chat, tc.want)
		}
	}
}

func TestResponsesRequestFlags(t *testing.T) {
	req, e := ParseRequest([]byte(`{"model":"m","input":"hi","stream":true,"background":true}`), anyModel)
	if e != nil || !req.Stream || !req.Background {
		t.Fatalf("%+v %+v", req, e)
	}
	if c, err := chat.ParseRequest(req.Chat); err != nil || c.Model != "m" {
		t.Fatalf("chat request %s: %+v %v", req.Chat, c, err)
	}
	if _, e := ParseRequest([]byte(`{"model":"m","input":"hi","background":"yes"}`), anyModel); e == nil || e.Param != "background" {
		t.Fatalf("background \"yes\": %+v", e)
	}
}

// FuzzParseRequest: Responses bodies come from clients. A body is refused
// with a 400 that says what is wrong, or with the caller's error for its
// model, or becomes a chat completion request that parses.
func FuzzParseRequest(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","input":"hi","stream":true}`,
		`{"model":"m","instructions":"x","input":[{"role":"user","content":[{"type":"input_text","text":"hi"}]}]}`,
		`{"model":"m","input":[{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":"1"}]}`,
		`{"model":"m","input":"hi","tools":[{"type":"function","name":"f"}],"tool_choice":"auto","text":{"format":{"type":"json_object"}}}`,
		`{"model":"m","input":[{"role":"user","content":[{"type":"input_image","image_url":"https://x/i.png"},{"type":"input_image","image_url":"file:///x"}]},"\ud800"]}`,
		`{"model":"unknown","input":"hi"}`, `{"model":"m","input":[]}`, `[]`, `null`,
	} {
		f.Add([]byte(s))
	}
	unknown := &wire.Error{Message: "no such model", Code: "model_not_found", Status: 404}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, e := ParseRequest(body, func(model string) *wire.Error {
			if model == "unknown" {
				return unknown
			}
			return nil
		})
		switch {
		case e == unknown:
		case e != nil && (e.Status != 400 || e.Message == "" || e.Code == "" || e.Type != wire.TypeInvalidRequest):
			t.Fatalf("bad error %+v", e)
		case e == nil:
			if _, err := chat.ParseRequest(req.Chat); err != nil {
				t.Fatalf("translated %s to %s: %v", body, req.Chat, err)
			}
		}
	})
}
