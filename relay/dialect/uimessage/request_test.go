package uimessage

import (
	"encoding/json"
	"strings"
	"testing"
)

// toChatCases are useChat bodies and the chat request each becomes (or
// the param of its error).
var toChatCases = []struct {
	name, body, want, param string
}{
	{
		name: "one text part is the content",
		body: `{"id":"c1","trigger":"submit-message","messageId":null,"messages":[{"id":"u1","role":"user","parts":[{"type":"text","text":"Hello"}]}]}`,
		want: `{"model":"dflt","stream":true,"messages":[{"role":"user","content":"Hello"}]}`,
	},
	{
		name: "body's model and system, passed parameters, app fields left",
		body: `{"id":"c1","model":"mock-2","system":"Be brief.","temperature":0.2,"max_tokens":50,"appState":{"x":1},"tools":[{"type":"function","function":{"name":"f"}}],` +
			`"messages":[{"id":"u1","role":"user","parts":[{"type":"text","text":"Hi"}]}]}`,
		want: `{"model":"mock-2","stream":true,"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"}],"tools":[{"type":"function","function":{"name":"f"}}],"temperature":0.2,"max_tokens":50}`,
	},
	{
		name: "files are images, several parts are content parts",
		body: `{"id":"c1","messages":[{"role":"user","parts":[{"type":"text","text":"What is it?"},{"type":"file","mediaType":"image/png","url":"data:image/png;base64,AAAA"},{"type":"data-app","data":1}]}]}`,
		want: `{"model":"dflt","stream":true,"messages":[{"role":"user","content":[{"type":"text","text":"What is it?"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}}]}]}`,
	},
	{
		name: "assistant steps with tool results, reasoning not sent back",
		body: `{"id":"c1","messages":[{"role":"system","parts":[{"type":"text","text":"S"}]},{"role":"user","parts":[{"type":"text","text":"Weather?"}]},` +
			`{"role":"assistant","parts":[{"type":"step-start"},{"type":"reasoning","text":"hmm"},{"type":"text","text":"Checking."},` +
			`{"type":"tool-weather","toolCallId":"t1","state":"output-available","input":{"city":"Bonn"},"output":{"temp":20}},` +
			`{"type":"dynamic-tool","toolName":"clock","toolCallId":"t2","state":"output-error","input":{},"errorText":"down"},` +
			`{"type":"step-start"},{"type":"text","text":"20 degrees."}]}]}`,
		want: `{"model":"dflt","stream":true,"messages":[{"role":"system","content":"S"},{"role":"user","content":"Weather?"},` +
			`{"role":"assistant","content":"Checking.","tool_calls":[{"id":"t1","type":"function","function":{"name":"weather","arguments":"{\"city\":\"Bonn\"}"}},{"id":"t2","type":"function","function":{"name":"clock","arguments":"{}"}}]},` +
			`{"role":"tool","content":"{\"temp\":20}","tool_call_id":"t1"},{"role":"tool","content":"down","tool_call_id":"t2"},{"role":"assistant","content":"20 degrees."}]}`,
	},
	{name: "not an object", body: `[1]`, param: ""},
	{name: "no chat id", body: `{"messages":[{"role":"user","parts":[{"type":"text","text":"x"}]}]}`, param: "id"},
	{name: "chat id with a slash", body: `{"id":"a/b","messages":[{"role":"user","parts":[{"type":"text","text":"x"}]}]}`, param: "id"},
	{name: "no messages", body: `{"id":"c","messages":[]}`, param: "messages"},
	{name: "unknown role", body: `{"id":"c","messages":[{"role":"tool","parts":[]}]}`, param: "messages[0].role"},
	{name: "a pdf", body: `{"id":"c","messages":[{"role":"user","parts":[{"type":"file","mediaType":"application/pdf","url":"data:application/pdf;base64,AA"}]}]}`, param: "messages[0].parts[0].mediaType"},
	{name: "a tool call without its output", body: `{"id":"c","messages":[{"role":"user","parts":[{"type":"text","text":"x"}]},{"role":"assistant","parts":[{"type":"tool-f","toolCallId":"t","state":"input-available","input":{}}]}]}`, param: "messages[1].parts[0].state"},
	{name: "a system message with a file", body: `{"id":"c","messages":[{"role":"system","parts":[{"type":"file","mediaType":"image/png","url":"x"}]}]}`, param: "messages[0].parts[0].type"},
	{name: "a user message of data parts only", body: `{"id":"c","messages":[{"role":"user","parts":[{"type":"data-x","data":1}]}]}`, param: "messages[0].parts"},
	{name: "messages of the wrong type", body: `{"id":"c","messages":{}}`, param: ""},
}

// TestToChat: each body's chat request, or a 400 naming the field at
// fault.
func TestToChat(t *testing.T) {
	for _, tc := range toChatCases {
		t.Run(tc.name, func(t *testing.T) {
			req, e := ToChat([]byte(tc.body), "dflt")
			if tc.want == "" {
				if e == nil {
					t.Fatalf("accepted as %s", req.Body)
				}
				if e.Status != 400 || e.Param != tc.param || e.Code == "" || e.Message == "" {
					t.Fatalf("error %+v, want a 400 on %q", e, tc.param)
				}
				return
			}
			if e != nil {
				t.Fatalf("refused: %+v", e)
			}
			if string(req.Body) != tc.want {
				t.Errorf("chat request\n %s\nwant\n %s", req.Body, tc.want)
			}
			if req.ChatID != "c1" {
				t.Errorf("chat id %q", req.ChatID)
			}
		})
	}
}

// TestToChatNeedsAModel: without the body's model or a default, a 400
// on model.
func TestToChatNeedsAModel(t *testing.T) {
	_, e := ToChat([]byte(`{"id":"c","messages":[{"role":"user","parts":[{"type":"text","text":"x"}]}]}`), "")
	if e == nil || e.Param != "model" || !strings.Contains(e.Message, "default") {
		t.Fatalf("error %+v", e)
	}
}

// FuzzToChat: bodies come from browsers. A body is refused with a 400
// that says what is wrong and has a code, or becomes a JSON object with
// the model, stream true and at least one message.
func FuzzToChat(f *testing.F) {
	for _, tc := range toChatCases {
		f.Add([]byte(tc.body))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, e := ToChat(body, "m")
		if e != nil {
			if e.Status != 400 || e.Message == "" || e.Code == "" {
				t.Fatalf("bad error %+v", e)
			}
			return
		}
		var out struct {
			Model    string            `json:"model"`
			Stream   bool              `json:"stream"`
			Messages []json.RawMessage `json:"messages"`
		}
		if err := json.Unmarshal(req.Body, &out); err != nil || out.Model == "" || !out.Stream || len(out.Messages) == 0 {
			t.Fatalf("accepted %s as %s (%v)", body, req.Body, err)
		}
		if CheckChatID(req.ChatID, "id") != nil {
			t.Fatalf("accepted chat id %q", req.ChatID)
		}
	})
}
