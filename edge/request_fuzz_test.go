package edge

import (
	"encoding/json"
	"testing"
)

// fuzzLimits are the limits of the request fuzz targets: both models are
// served, the key may use testModel only.
var fuzzLimits = limits{
	served:      func(m string) bool { return m == testModel || m == otherModel },
	allowed:     func(m string) bool { return m == testModel },
	maxMessages: 4,
	maxTokens:   100,
}

// FuzzParseChatRequest: request bodies come from clients. A body is
// refused with a 400 naming what is wrong, or accepted within the limits:
// an allowed model, at most maxMessages messages, max_tokens within the
// cap, and a body forwarded as valid JSON.
func FuzzParseChatRequest(f *testing.F) {
	for _, s := range []string{
		`{"model":"gpt-test","messages":[{"role":"user","content":"hi"}],"stream":true}`,
		`{"model":"gpt-test","messages":[{"role":"user"}],"n":1,"stream":null}`,
		`{"model":"gpt-test","messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}],"max_tokens":100,"temperature":0.5}`,
		`{"model":"gpt-test","messages":[{"role":"assistant","content":null,"tool_calls":[]}],"stop":["a","b"],"seed":1}`,
		`{"model":"gpt-other","messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"gpt-test","messages":[{"role":"user","content":"a"},{"role":"user","content":"b"},{"role":"user","content":"c"},{"role":"user","content":"d"},{"role":"user","content":"e"}]}`,
		`{"model":"gpt-test","messages":[{"role":"user","content":7}],"max_tokens":1e9}`,
		`{"model":"x","messages":[]}`,
		`[]`, `null`, `{"model":1}`, `{"messages":[{"role":""}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, e := parseChatRequest(body, fuzzLimits)
		if e != nil {
			if e.Status != 400 && (e.Status != 404 || e.Code != CodeModelNotFound) || e.Type != "invalid_request_error" || e.Message == "" || e.Code == "" {
				t.Fatalf("bad error %+v", e)
			}
			return
		}
		if req.Model != testModel || !json.Valid(req.Body) {
			t.Fatalf("accepted %q as %+v", body, req)
		}
		// Keys are matched exactly, as providers match them.
		var fields map[string]json.RawMessage
		var messages []json.RawMessage
		if json.Unmarshal(req.Body, &fields) != nil || json.Unmarshal(fields["messages"], &messages) != nil {
			t.Fatalf("accepted %q without messages", body)
		}
		var maxTokens float64
		if raw, ok := fields["max_tokens"]; ok && !isNull(raw) && (json.Unmarshal(raw, &maxTokens) != nil || maxTokens > float64(fuzzLimits.maxTokens)) {
			t.Fatalf("accepted %q with max_tokens over the cap", body)
		}
		if len(messages) == 0 || len(messages) > fuzzLimits.maxMessages {
			t.Fatalf("accepted %q with %d messages", body, len(messages))
		}
	})
}

// FuzzDisconnectPolicy: X-Relay-On-Disconnect comes from clients. A policy
// parses or is refused with a message, and what parses renders back to
// itself.
func FuzzDisconnectPolicy(f *testing.F) {
	for _, s := range []string{"continue", "cancel_after 30s", "cancel_after 1h2m3.5s", "cancel_after", "cancel_after -1s", " ", "cancel_after 1e9h"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := parseDisconnectPolicy(s)
		if err != nil {
			if err.Error() == "" || p != (DisconnectPolicy{}) {
				t.Fatalf("%q: %+v, %v", s, p, err)
			}
			return
		}
		if p.CancelAfter < 0 {
			t.Fatalf("%q: negative %v", s, p.CancelAfter)
		}
		if back, err := parseDisconnectPolicy(p.String()); err != nil || back != p {
			t.Fatalf("%q: %v renders as %q, which parses as %+v, %v", s, p, p.String(), back, err)
		}
	})
}
