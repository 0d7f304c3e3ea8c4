package worker

import (
	"encoding/json"
	"testing"
)

// A kept answer is found again by the same request however it is sent
// (streamed or not, members in another order, 0 or 0.0, another user id),
// and never by another tenant's request, another model's, or one whose
// parameters change the answer.
func TestAnswerKey(t *testing.T) {
	const base = `{"model":"m","messages":[{"role":"user","content":"Hi."}],"temperature":0,"tools":[{"type":"function","function":{"name":"f"}}]}`
	key := func(tenant, model, body string) string {
		t.Helper()
		k, err := answerKey(tenant, model, json.RawMessage(body))
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	want := key("acme", "m", base)
	for name, body := range map[string]string{
		"streamed":        `{"model":"m","messages":[{"role":"user","content":"Hi."}],"temperature":0,"tools":[{"type":"function","function":{"name":"f"}}],"stream":true,"stream_options":{"include_usage":true}}`,
		"not streamed":    `{"stream":false,"model":"m","messages":[{"role":"user","content":"Hi."}],"temperature":0,"tools":[{"type":"function","function":{"name":"f"}}]}`,
		"reordered":       `{"tools":[{"function":{"name":"f"},"type":"function"}],"temperature":0.0,"messages":[{"content":"Hi.","role":"user"}],"model":"m"}`,
		"another user id": `{"model":"m","messages":[{"role":"user","content":"Hi."}],"temperature":0,"tools":[{"type":"function","function":{"name":"f"}}],"user":"u-42","safety_identifier":"s"}`,
		"null member":     `{"model":"m","messages":[{"role":"user","content":"Hi."}],"temperature":0,"tools":[{"type":"function","function":{"name":"f"}}],"seed":null}`,
	} {
		if got := key("acme", "m", body); got != want {
			t.Errorf("%s: key %s, want the base request's %s", name, got, want)
		}
	}
	for name, k := range map[string]string{
		"another tenant":      key("beta", "m", base),
		"no tenant":           key("", "m", base),
		"another model":       key("acme", "m2", base),
		"another temperature": key("acme", "m", `{"model":"m","messages":[{"role":"user","content":"Hi."}],"temperature":0.7,"tools":[{"type":"function","function":{"name":"f"}}]}`),
		"another message":     key("acme", "m", `{"model":"m","messages":[{"role":"user","content":"Hi!"}],"temperature":0,"tools":[{"type":"function","function":{"name":"f"}}]}`),
		"no tools":            key("acme", "m", `{"model":"m","messages":[{"role":"user","content":"Hi."}],"temperature":0}`),
		"a max_tokens":        key("acme", "m", `{"model":"m","messages":[{"role":"user","content":"Hi."}],"temperature":0,"tools":[{"type":"function","function":{"name":"f"}}],"max_tokens":5}`),
	} {
		if k == want {
			t.Errorf("%s: same key as the base request", name)
		}
	}
	if _, err := answerKey("acme", "m", json.RawMessage(`[1]`)); err == nil {
		t.Error("a body that is not an object has a key")
	}
}

// Prefer mode answers from the cache only requests that ask for
// temperature 0: the default temperature samples.
func TestDeterministic(t *testing.T) {
	for body, want := range map[string]bool{
		`{"temperature":0}`:    true,
		`{"temperature":0.0}`:  true,
		`{"temperature":0.2}`:  false,
		`{}`:                   false,
		`{"temperature":null}`: false,
	} {
		if got := deterministic(json.RawMessage(body)); got != want {
			t.Errorf("deterministic(%s) = %v, want %v", body, got, want)
		}
	}
}
