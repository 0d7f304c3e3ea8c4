package edge

import (
	"encoding/json"
	"testing"
)

// FuzzParseResponsesRequest: Responses bodies come from clients. A body is
// refused with an OpenAI error naming what is wrong (404 for a model the
// key may not use, else 400), or becomes a chat completion request that
// the chat checks accept, for an allowed model.
func FuzzParseResponsesRequest(f *testing.F) {
	for _, s := range []string{
		`{"model":"gpt-test","input":"hi","stream":true}`,
		`{"model":"gpt-test","instructions":"x","input":[{"role":"user","content":[{"type":"input_text","text":"hi"}]}]}`,
		`{"model":"gpt-test","input":[{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":"1"}]}`,
		`{"model":"gpt-test","input":"hi","tools":[{"type":"function","name":"f"}],"tool_choice":"auto","text":{"format":{"type":"json_object"}}}`,
		`{"model":"gpt-other","input":"hi"}`,
		`{"model":"gpt-test","input":[{"role":"user","content":[{"type":"input_image"}]}]}`,
		`{"model":"gpt-test","input":[{"role":"user","content":[{"type":"input_image","image_url":"https://x/i.png"},{"type":"input_image","image_url":"data:text/html,x"}]},"\udc00"]}`,
		`{"model":"gpt-test","input":[]}`, `[]`, `null`, `{"model":1}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, e := parseResponsesRequest(body, fuzzLimits)
		if e != nil {
			if e.Status != 400 && (e.Status != 404 || e.Code != CodeModelNotFound) || e.Message == "" || e.Code == "" {
				t.Fatalf("bad error %+v", e)
			}
			return
		}
		if req.chat.Model != testModel || !json.Valid(req.chat.Body) {
			t.Fatalf("accepted %s as %+v", body, req.chat)
		}
		if _, e := parseChatRequest(req.chat.Body, fuzzLimits); e != nil {
			t.Fatalf("translated body %s refused: %+v", req.chat.Body, e)
		}
	})
}
