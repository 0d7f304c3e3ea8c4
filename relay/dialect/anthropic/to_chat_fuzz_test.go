package anthropic

import (
	"encoding/json"
	"testing"
)

// FuzzToChat: Messages bodies come from clients. A body is refused with a
// 400 that says what is wrong and has a code, or becomes a JSON object
// with the model, max_tokens and messages, for the chat checks (the
// edge's FuzzParseMessagesRequest holds it to them).
func FuzzToChat(f *testing.F) {
	for _, tc := range toChatCases {
		f.Add([]byte(tc.body))
	}
	for _, s := range []string{`[]`, `null`, `{"model":1}`, `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"tool_result"}]}]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, e := ToChat(body, anyModel)
		if e != nil {
			if e.Status != 400 || e.Message == "" || e.Code == "" {
				t.Fatalf("bad error %+v", e)
			}
			return
		}
		var fields map[string]json.RawMessage
		if json.Unmarshal(req.Body, &fields) != nil || fields["model"] == nil || fields["max_tokens"] == nil || fields["messages"] == nil {
			t.Fatalf("accepted %s as %s", body, req.Body)
		}
	})
}
