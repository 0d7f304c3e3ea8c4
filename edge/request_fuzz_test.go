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
