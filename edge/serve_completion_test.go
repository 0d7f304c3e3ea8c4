package edge

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/relaydev/relay/relay/dialect/chat"
	"github.com/relaydev/relay/relay/wire"
)

func TestNonStreamingCompletion(t *testing.T) {
	e := newEnv(t)
	w := e.startWorker(&worker{script: answer(5)})
	edge := e.startEdge(Config{})

	// No "stream" means false, as with OpenAI.
	res := do(t, "POST", edge.url+"/v1/chat/completions", `{"model":"gpt-test","messages":[{"role":"user","content":"hi"}]}`, nil)
	body := readAll(t, res)
	id := res.Header.Get("X-Relay-Stream-Id")
	req := <-w.reqs
	if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("status %d: %s", res.StatusCode, body)
	}
	want := fmt.Sprintf(`{"id":"chatcmpl-%[1]s","object":"chat.completion","created":%[2]d,"model":"gpt-test",`+
		`"choices":[{"index":0,"message":{"role":"assistant","content":"w1 w2 w3 w4 w5 "},"finish_reason":"stop"}],`+
		`"usage":{"prompt_tokens":3,"completion_tokens":5,"total_tokens":8},`+
		`"relay":{"stream_id":"%[1]s","seq":6,"cursor":"%[3]s","status":"done","attempts":1,"cost":0.25,"provider":"alpha","model":"gpt-test"}}`+"\n",
		id, req.Created, e.seal(wire.Cursor{Seq: 6, JSSeq: 7}))
	if body != want {
		t.Fatalf("body\n%s\nwant\n%s", body, want)
	}
}

func TestNonStreamingToolCalls(t *testing.T) {
	e := newEnv(t)
	e.startWorker(&worker{script: func(wire.Request) []wire.Frame {
		return []wire.Frame{
			{Kind: wire.KindChunk, Role: "assistant", ToolCalls: []byte(`[{"index":0,"id":"call_a","type":"function","function":{"name":"get","arguments":""}},{"index":1,"id":"call_b","type":"function","function":{"name":"put","arguments":"{\"k\""}}]`)},
			{Kind: wire.KindChunk, ToolCalls: []byte(`[{"index":1,"function":{"arguments":":1}"}},{"index":0,"function":{"arguments":"{}"}}]`)},
			{Kind: wire.KindEnd, Status: wire.StatusDone, FinishReason: "tool_calls", Attempts: 1},
		}
	}})
	edge := e.startEdge(Config{})
	var got struct {
		Choices []struct {
			Message      chat.CompletionMessage `json:"message"`
			FinishReason string                 `json:"finish_reason"`
		} `json:"choices"`
	}
	body := readAll(t, do(t, "POST", edge.url+"/v1/chat/completions", chatBody(false, "call"), nil))
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatal(err)
	}
	msg := got.Choices[0].Message
	if msg.Content != nil || len(msg.ToolCalls) != 2 || got.Choices[0].FinishReason != "tool_calls" ||
		msg.ToolCalls[0].ID != "call_a" || msg.ToolCalls[0].Function.Arguments != "{}" ||
		msg.ToolCalls[1].Function.Name != "put" || msg.ToolCalls[1].Function.Arguments != `{"k":1}` {
		t.Fatalf("body %s", body)
	}
}

// TestNonStreamingCutAnswer: an answer that ended incomplete or cancelled
// is a 200 with the text so far, no finish reason, its status and the
// error that cut it: never a 5xx, which SDKs retry at the price of a new
// generation.
func TestNonStreamingCutAnswer(t *testing.T) {
	for _, tc := range []struct {
		status wire.Status
		err    *wire.Error
		code   string
	}{
		{wire.StatusIncomplete, &wire.Error{Message: "the provider failed mid-answer", Type: wire.TypeIncomplete, Code: "retries_exhausted", Status: 502}, "retries_exhausted"},
		{wire.StatusIncomplete, nil, "incomplete"},
		{wire.StatusCancelled, cancelledEnd(1).Error, "cancelled"},
	} {
		t.Run(string(tc.status)+" "+tc.code, func(t *testing.T) {
			var got chat.Completion
			res, body := askWhole(t, failing(tc.status, tc.err), &got)
			c := got.Choices[0]
			if res.StatusCode != http.StatusOK || res.Header.Get("Retry-After") != "" || c.Message.Content == nil || *c.Message.Content != "partial" ||
				c.FinishReason != nil || got.Relay.Status != tc.status || got.Error == nil || got.Error.Code != tc.code ||
				got.Usage == nil || got.Usage.TotalTokens != 7 {
				t.Fatalf("status %d: %s", res.StatusCode, body)
			}
		})
	}
}

func TestNonStreamingErrorTerminal(t *testing.T) {
	for _, tc := range []struct {
		name   string
		err    *wire.Error
		status int
	}{
		{"status from the error", &wire.Error{Message: "rate limited everywhere", Type: wire.TypeUpstream, Code: "rate_limited", Status: 429}, 429},
		{"default 502", nil, 502},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got chat.Failure
			res, body := askWhole(t, failing(wire.StatusFailed, tc.err), &got)
			if res.StatusCode != tc.status || got.Error.Type != wire.TypeUpstream || got.Relay.Status != wire.StatusFailed || got.Relay.StreamID != res.Header.Get("X-Relay-Stream-Id") ||
				got.Usage == nil || got.Usage.TotalTokens != 7 {
				t.Fatalf("status %d: %s", res.StatusCode, body)
			}
		})
	}
}

// askWhole asks for a whole answer from a worker playing sc and decodes
// the body into v.
func askWhole(t *testing.T, sc script, v any) (*http.Response, string) {
	t.Helper()
	e := newEnv(t)
	e.startWorker(&worker{script: sc})
	edge := e.startEdge(Config{})
	res := do(t, "POST", edge.url+"/v1/chat/completions", chatBody(false, "hi"), nil)
	body := readAll(t, res)
	if err := json.Unmarshal([]byte(body), v); err != nil {
		t.Fatal(err)
	}
	return res, body
}
