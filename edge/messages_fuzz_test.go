package edge

import (
	"encoding/json"
	"testing"
)

// FuzzParseMessagesRequest: Messages bodies come from clients. A body is
// refused with an error naming what is wrong (404 for a model the key may
// not use, else 400), or becomes a chat completion request that the chat
// checks accept, for an allowed model.
func FuzzParseMessagesRequest(f *testing.F) {
	for _, s := range []string{
		`{"model":"gpt-test","max_tokens":5,"messages":[{"role":"user","content":"hi"}],"stream":true}`,
		`{"model":"gpt-test","max_tokens":5,"system":[{"type":"text","text":"s"}],"messages":[{"role":"user","content":[{"type":"text","text":"hi"},{"type":"image","source":{"type":"url","url":"https://x/i.png"}},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AA=="}}]}]}`,
		`{"model":"gpt-test","max_tokens":5,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"url","url":"file:///etc/passwd"}}]},{"role":"user","content":"\ud800"}]}`,
		`{"model":"gpt-test","max_tokens":5,"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"1"}]}]}`,
		`{"model":"gpt-test","max_tokens":5,"tools":[{"name":"f","input_schema":{}}],"tool_choice":{"type":"tool","name":"f"},"messages":[{"role":"user","content":"x"}]}`,
		`{"model":"gpt-other","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"gpt-test","max_tokens":0,"messages":[{"role":"user","content":""}]}`,
		`{"model":"gpt-test","max_tokens":5,"messages":[]}`, `[]`, `null`, `{"model":1}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, e := parseMessagesRequest(body, fuzzLimits)
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
