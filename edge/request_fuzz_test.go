package edge

import (
	"encoding/json"
	"testing"
)

func FuzzParseChatRequest(f *testing.F) {
	for _, s := range []string{
		`{"model":"gpt-test","messages":[{"role":"user","content":"hi"}],"stream":true}`,
		`{"model":"gpt-test","messages":[{"role":"user"}],"n":1,"stream":null}`,
		`{"model":"x","messages":[]}`,
		`[]`, `null`, `{"model":1}`, `{"messages":[{"role":""}]}`,
	} {
		f.Add([]byte(s))
	}
	served := func(m string) bool { return m == testModel }
	f.Fuzz(func(t *testing.T, body []byte) {
		req, e := parseChatRequest(body, served)
		if e != nil {
			if e.Status != 400 || e.Type != "invalid_request_error" || e.Message == "" {
				t.Fatalf("bad error %+v", e)
			}
			return
		}
		if req.Model != testModel || !json.Valid(req.Body) {
			t.Fatalf("accepted %q as %+v", body, req)
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
