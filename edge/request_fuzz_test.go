package edge

import (
	"bytes"
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
	for _, s := range chatSeeds {
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

// chatSeeds are request bodies the chat fuzz targets start from.
var chatSeeds = []string{
	`{"model":"gpt-test","messages":[{"role":"user","content":"hi"}],"stream":true}`,
	`{"model":"gpt-test","messages":[{"role":"user"}],"n":1,"stream":null}`,
	`{"model":"gpt-test","messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}],"max_tokens":100,"temperature":0.5}`,
	`{"model":"gpt-test","messages":[{"role":"assistant","content":null,"tool_calls":[]}],"stop":["a","b"],"seed":1}`,
	`{"model":"gpt-other","messages":[{"role":"user","content":"hi"}]}`,
	`{"model":"gpt-test","messages":[{"role":"user","content":"a"},{"role":"user","content":"b"},{"role":"user","content":"c"},{"role":"user","content":"d"},{"role":"user","content":"e"}]}`,
	`{"model":"gpt-test","messages":[{"role":"user","content":7}],"max_tokens":1e9}`,
	`{"model":"x","messages":[]}`,
	`[]`, `null`, `{"model":1}`, `{"messages":[{"role":""}]}`,
	` {"model":"gpt-test","messages":[{"role":"system","content":"be \"brief\"\n"},{"role":"user","content":"h\u00e9"}],"stream":false,"n":null} `,
	`{"model":"gpt-test","model":"gpt-other","messages":[{"role":"user","content":"hi"}]}`,
	`{"mod\u0065l":"gpt-test","messages":[{"role":"user","content":"hi"}]}`,
	`{"model":"gpt-test","messages":[{"role":"user","role":"tool","content":"hi"}],"top_p":1,"presence_penalty":-2,"frequency_penalty":2.0}`,
	`{"model":"gpt-test","messages":[{"role":"user","content":"hi"}],"temperature":1e400,"seed":-0,"user":"u","logprobs":false}`,
	`{"model":"gpt-test","messages":[{"role":"user","content":"hi"}],"max_completion_tokens":100.0,"stop":"x","tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}]}`,
	`{"model":"gpt-test","messages":[{"role":"user","content":"hi"}],"stream_options":{"include_usage":true},"response_format":{"type":"json_object"},"stop":[null,"a","b","c","d"]}`,
	`{"model":"gpt-test","messages":[{"role":"user","content":[null]}]}`,
	`{"model":"gpt-test","messages":[{"role":"user","content":[{"type":""}]}]} x`,
}

// FuzzScanChatRequest holds the one pass (request_scan.go) to
// encoding/json's answers: a body it accepts, decodeChatRequest accepts
// with the same model, stream flag and body.
func FuzzScanChatRequest(f *testing.F) {
	for _, s := range chatSeeds {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	f.Fuzz(func(t *testing.T, body []byte, unlimited bool) {
		lim := fuzzLimits
		if unlimited {
			lim.allowed, lim.maxMessages, lim.maxTokens = nil, -1, -1
		}
		got, ok := scanChatRequest(body, lim)
		if !ok {
			return
		}
		want, e := decodeChatRequest(body, lim)
		if e != nil {
			t.Fatalf("one pass accepted %q, encoding/json: %+v", body, e)
		}
		if got.Model != want.Model || got.Stream != want.Stream || !bytes.Equal(got.Body, want.Body) {
			t.Fatalf("%q: one pass %+v, encoding/json %+v", body, got, want)
		}
	})
}

// TestScanChatRequestTakesTheCommonRequests: the requests clients send
// every turn are accepted by the one pass, not left to encoding/json.
func TestScanChatRequestTakesTheCommonRequests(t *testing.T) {
	common := []string{
		chatSeeds[0], chatSeeds[2], chatSeeds[3], chatSeeds[12],
		`{"model":"gpt-test","messages":[{"role":"developer","content":"x"},{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":true},` +
			`"response_format":{"type":"json_object"},"stop":[null,"a","b","c"],"user":"u","seed":7,"logprobs":true,"max_completion_tokens":50,` +
			`"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],"tool_choice":"auto"}`,
		`{"model":"gpt-test","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},` +
			`{"role":"tool","tool_call_id":"c","content":"42"}],"temperature":0,"top_p":0.9}`,
	}
	for _, s := range common {
		if _, ok := scanChatRequest([]byte(s), fuzzLimits); !ok {
			t.Errorf("left to encoding/json: %s", s)
		}
	}
}
