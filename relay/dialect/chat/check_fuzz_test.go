package chat

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/relaydev/relay/relay/jsonscan"
	"github.com/relaydev/relay/relay/wire"
)

// Models of the request tests: both are served, the key of fuzzLimits may
// use testModel only.
const (
	testModel  = "gpt-test"
	otherModel = "gpt-other"
)

// fuzzLimits are the limits of the request fuzz targets.
var fuzzLimits = Limits{
	Served:      func(m string) bool { return m == testModel || m == otherModel },
	Allowed:     func(m string) bool { return m == testModel },
	MaxMessages: 4,
	MaxTokens:   100,
}

// FuzzCheckRequest: request bodies come from clients. A body is
// refused with a 400 naming what is wrong, or accepted within the limits:
// an allowed model, at most maxMessages messages, max_tokens within the
// cap, and a body forwarded as valid JSON of valid text.
func FuzzCheckRequest(f *testing.F) {
	for _, s := range chatSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, e := CheckRequest(body, fuzzLimits)
		if e != nil {
			if e.Status != 400 && (e.Status != 404 || e.Code != CodeModelNotFound) || e.Type != "invalid_request_error" || e.Message == "" || e.Code == "" {
				t.Fatalf("bad error %+v", e)
			}
			return
		}
		if req.Model != testModel || !json.Valid(req.Body) || !jsonscan.ValidText(req.Body) {
			t.Fatalf("accepted %q as %+v", body, req)
		}
		// Keys are matched exactly, as providers match them.
		var fields map[string]json.RawMessage
		var messages []json.RawMessage
		if json.Unmarshal(req.Body, &fields) != nil || json.Unmarshal(fields["messages"], &messages) != nil {
			t.Fatalf("accepted %q without messages", body)
		}
		var maxTokens float64
		if raw, ok := fields["max_tokens"]; ok && !isNull(raw) && (json.Unmarshal(raw, &maxTokens) != nil || maxTokens > float64(fuzzLimits.MaxTokens)) {
			t.Fatalf("accepted %q with max_tokens over the cap", body)
		}
		if len(messages) == 0 || len(messages) > fuzzLimits.MaxMessages {
			t.Fatalf("accepted %q with %d messages", body, len(messages))
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
	`{"model":"gpt-test","messages":[{"role":"user","content":[{"type":"text","text":"?"},{"type":"image_url","image_url":{"url":"https://x/i.png","detail":"low"}},{"type":"image_url","image_url":{"url":"data:image/png;base64,AA=="}}]}]}`,
	`{"model":"gpt-test","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"file:///etc/passwd"}},{"type":"image_url","image_url":{"url":"data:text/html,x"}}]}]}`,
	`{"model":"gpt-test","messages":[{"role":"user","content":"\ud800 \ud83d\ude00 \\udc00"}]}`,
	"{\"model\":\"gpt-test\",\"messages\":[{\"role\":\"user\",\"content\":\"caf\xe9\"}]}",
}

// FuzzScanRequest holds the one pass (check_scan.go) to encoding/json's
// answers: a body it accepts, decodeRequest accepts with the same model,
// stream flag and body.
func FuzzScanRequest(f *testing.F) {
	for _, s := range chatSeeds {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	f.Fuzz(func(t *testing.T, body []byte, unlimited bool) {
		lim := fuzzLimits
		if unlimited {
			lim.Allowed, lim.MaxMessages, lim.MaxTokens = nil, -1, -1
		}
		got, ok := scanRequest(body, lim)
		if !ok {
			return
		}
		want, e := decodeRequest(body, lim)
		if e != nil {
			t.Fatalf("one pass accepted %q, encoding/json: %+v", body, e)
		}
		if got.Model != want.Model || got.Stream != want.Stream || !bytes.Equal(got.Body, want.Body) {
			t.Fatalf("%q: one pass %+v, encoding/json %+v", body, got, want)
		}
	})
}

// TestScanRequestTakesTheCommonRequests: the requests clients send every
// turn are accepted by the one pass, not left to encoding/json.
func TestScanRequestTakesTheCommonRequests(t *testing.T) {
	common := []string{
		chatSeeds[0], chatSeeds[2], chatSeeds[3], chatSeeds[12], chatSeeds[21],
		`{"model":"gpt-test","messages":[{"role":"developer","content":"x"},{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":true},` +
			`"response_format":{"type":"json_object"},"stop":[null,"a","b","c"],"user":"u","seed":7,"logprobs":true,"max_completion_tokens":50,` +
			`"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],"tool_choice":"auto"}`,
		`{"model":"gpt-test","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},` +
			`{"role":"tool","tool_call_id":"c","content":"42"}],"temperature":0,"top_p":0.9}`,
	}
	for _, s := range common {
		if _, ok := scanRequest([]byte(s), fuzzLimits); !ok {
			t.Errorf("left to encoding/json: %s", s)
		}
	}
}

// BenchmarkCheckRequest checks a request body with encoding/json
// (decodeRequest), as the edge did, and in one pass (CheckRequest): a
// first turn and a conversation of 21 messages.
func BenchmarkCheckRequest(b *testing.B) {
	lim := fuzzLimits
	lim.MaxMessages = -1
	for _, turns := range []int{1, 21} {
		body := conversation(turns)
		for _, c := range []struct {
			name  string
			check func([]byte, Limits) (Checked, *wire.Error)
		}{{"encoding-json", decodeRequest}, {"one-pass", CheckRequest}} {
			b.Run(fmt.Sprintf("%d-messages/%s", turns, c.name), func(b *testing.B) {
				b.SetBytes(int64(len(body)))
				for b.Loop() {
					if _, e := c.check(body, lim); e != nil {
						b.Fatal(e)
					}
				}
			})
		}
	}
}

// conversation is a streamed request for testModel with turns messages of
// about 1 KB each, users' and assistants' in turn, as a chat client sends
// its whole conversation with every turn (relaytest.Conversation).
func conversation(turns int) []byte {
	type message struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	}
	req := struct {
		Model         string          `json:"model"`
		Stream        bool            `json:"stream"`
		StreamOptions json.RawMessage `json:"stream_options"`
		Temperature   float64         `json:"temperature"`
		MaxTokens     int             `json:"max_tokens"`
		Messages      []message       `json:"messages"`
	}{testModel, true, json.RawMessage(`{"include_usage":true}`), 0.7, 50, make([]message, turns)}
	for i := range req.Messages {
		req.Messages[i] = message{"user", strings.Repeat("lorem ipsum dolor sit amet, ", 36)}
		if i%2 == 1 {
			req.Messages[i].Role = "assistant"
		}
	}
	return marshal(req)
}
