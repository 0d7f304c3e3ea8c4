package edge

import (
	"bufio"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/relaydev/relay/relay/dialect/anthropic"
	"github.com/relaydev/relay/relay/wire"
)

// messagesBody is a Messages request for testModel.
func messagesBody(extra string) string {
	return fmt.Sprintf(`{"model":%q,"max_tokens":100,"messages":[{"role":"user","content":"hi"}]%s}`, testModel, extra)
}

// anthropicHeaders are what Anthropic's SDKs send: the key in X-Api-Key
// and a version the edge does not know.
func anthropicHeaders(key string) http.Header {
	return http.Header{"X-Api-Key": {key}, "Anthropic-Version": {"2099-01-01"}, "Content-Type": {"application/json"}}
}

// msgEvent is the part of an Anthropic event the tests check.
type msgEvent struct {
	id      string
	Type    string `json:"type"`
	Index   int    `json:"index"`
	Message *struct {
		ID         string  `json:"id"`
		StopReason *string `json:"stop_reason"`
	} `json:"message"`
	ContentBlock *struct {
		Type string `json:"type"`
		ID   string `json:"id"`
		Name string `json:"name"`
	} `json:"content_block"`
	Delta *struct {
		Type        string `json:"type"`
		Text        string `json:"text"`
		Thinking    string `json:"thinking"`
		PartialJSON string `json:"partial_json"`
		StopReason  string `json:"stop_reason"`
	} `json:"delta"`
	Usage *anthropic.Usage `json:"usage"`
	Error *anthropic.Error `json:"error"`
}

// msgEvents decodes an Anthropic event stream, checking that every event
// has its type in both its event line and its data; pings are left out.
func msgEvents(t *testing.T, body string) []msgEvent {
	t.Helper()
	var out []msgEvent
	for _, ev := range parseSSE(t, body) {
		if ev.Retry != "" || ev.Comment != "" || ev.Event == "ping" {
			continue
		}
		var me msgEvent
		if err := decodeInto(ev.Data, &me); err != nil || me.Type != ev.Event {
			t.Fatalf("event %q with data %s (%v)", ev.Event, ev.Data, err)
		}
		me.id = ev.ID
		out = append(out, me)
	}
	return out
}

// msgText is the text of the text deltas.
func msgText(events []msgEvent) string {
	var b strings.Builder
	for _, ev := range events {
		if ev.Delta != nil && ev.Delta.Type == "text_delta" {
			b.WriteString(ev.Delta.Text)
		}
	}
	return b.String()
}

// msgTypes are the events' types, in order.
func msgTypes(events []msgEvent) string {
	types := make([]string, len(events))
	for i, ev := range events {
		types[i] = ev.Type
	}
	return strings.Join(types, " ")
}

// messageResult is the part of a Message the tests check.
type messageResult struct {
	ID         string  `json:"id"`
	Type       string  `json:"type"`
	StopReason *string `json:"stop_reason"`
	Content    []struct {
		Type     string         `json:"type"`
		Text     string         `json:"text"`
		Thinking string         `json:"thinking"`
		ID       string         `json:"id"`
		Name     string         `json:"name"`
		Input    map[string]any `json:"input"`
	} `json:"content"`
	Usage anthropic.Usage  `json:"usage"`
	Error *anthropic.Error `json:"error"`
}

func decodeMessage(t *testing.T, res *http.Response) messageResult {
	t.Helper()
	var m messageResult
	if err := jsonDecode(res, &m); err != nil || m.Type != "message" {
		t.Fatalf("status %d: not a Message (%v)", res.StatusCode, err)
	}
	return m
}

// decodeAnthropicError decodes an error body in Anthropic's shape.
func decodeAnthropicError(t *testing.T, res *http.Response) anthropic.Error {
	t.Helper()
	var body anthropic.ErrorBody
	if err := jsonDecode(res, &body); err != nil || body.Type != "error" || body.Error.Type == "" {
		t.Fatalf("status %d: not an Anthropic error (%v) %+v", res.StatusCode, err, body)
	}
	return body.Error
}

// reasoningFrames are reasoning, text, a tool call in two fragments and a
// done end.
func reasoningFrames() []wire.Frame {
	return []wire.Frame{
		{Kind: wire.KindChunk, Role: "assistant", Reasoning: "Think.", Provider: "alpha", Model: testModel, Attempt: 1},
		{Kind: wire.KindChunk, Content: "Hel", Provider: "alpha", Model: testModel, Attempt: 1},
		{Kind: wire.KindChunk, Content: "lo", Provider: "beta", Model: otherModel, Attempt: 2, Seam: wire.SeamFallback,
			ToolCalls: []byte(`[{"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":"{\"a\":"}}]`)},
		{Kind: wire.KindChunk, ToolCalls: []byte(`[{"index":0,"function":{"arguments":"1}"}}]`), Provider: "beta", Model: otherModel, Attempt: 2},
		{Kind: wire.KindEnd, Status: wire.StatusDone, FinishReason: "tool_calls", Attempts: 2,
			Usage: &wire.Usage{PromptTokens: 4, CompletionTokens: 3, TotalTokens: 7}},
	}
}

// TestMessagesWireFormat pins the events of a stream with reasoning, text,
// a fallback seam and a tool call, and shows that a resume after any
// event's id, on any edge, writes exactly the events after it.
func TestMessagesWireFormat(t *testing.T) {
	e := newEnv(t)
	edge1, edge2 := e.startEdge(Config{RetryHint: 1500 * time.Millisecond}), e.startEdge(Config{})
	e.writeStream(fixedID, wire.Meta{Model: testModel, Created: 1700000000}, reasoningFrames())
	url := "/v1/messages/" + anthropic.MessageID(fixedID)

	whole := readAll(t, do(t, "GET", edge1.url+url, "", http.Header{"Accept": {"text/event-stream"}}))
	golden(t, "messages_done.sse", whole)
	all := parseSSE(t, whole)[1:] // after the retry
	for i, ev := range all {
		if ev.ID != fmt.Sprint(i) {
			t.Fatalf("event %d has id %q", i, ev.ID)
		}
	}
	for _, after := range []int{0, 4, len(all) - 2} {
		res := do(t, "GET", edge2.url+url, "", http.Header{"Last-Event-ID": {fmt.Sprint(after)}})
		if got, want := parseSSE(t, readAll(t, res))[1:], all[after+1:]; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("after %d:\n%+v\nwant\n%+v", after, got, want)
		}
	}

	res := do(t, "GET", edge2.url+url, "", nil)
	m := decodeMessage(t, res)
	if res.StatusCode != http.StatusOK || m.ID != "msg_"+fixedID || deref(m.StopReason) != "tool_use" || len(m.Content) != 3 ||
		m.Content[0].Thinking != "Think." || m.Content[1].Text != "Hello" || m.Content[2].Type != "tool_use" ||
		m.Content[2].ID != "call_1" || m.Content[2].Input["a"] != 1.0 || !reflect.DeepEqual(m.Usage, anthropic.Usage{InputTokens: 4, OutputTokens: 3}) {
		t.Fatalf("Message %d %+v", res.StatusCode, m)
	}

	for _, bad := range []struct {
		url    string
		header http.Header
		status int
		typ    string
	}{
		{"/v1/messages/msg_nope", nil, http.StatusNotFound, "not_found_error"},
		{"/v1/messages/msg_sunknownunknownunknown1", nil, http.StatusNotFound, "not_found_error"},
		{url, http.Header{"Last-Event-ID": {"x"}}, http.StatusBadRequest, "invalid_request_error"},
	} {
		res := do(t, "GET", edge1.url+bad.url, "", bad.header)
		if got := decodeAnthropicError(t, res); res.StatusCode != bad.status || got.Type != bad.typ {
			t.Errorf("GET %s %v: %d %+v", bad.url, bad.header, res.StatusCode, got)
		}
	}
}

// TestMessagesStreamAndWhole streams an answer and asks for one whole,
// through a worker, as an Anthropic client: its key in X-Api-Key.
func TestMessagesStreamAndWhole(t *testing.T) {
	e := newEnv(t)
	w := e.startWorker(&worker{script: answer(5)})
	edge := e.startEdge(tenantConfig())

	res := do(t, "POST", edge.url+"/v1/messages", messagesBody(`,"stream":true`), anthropicHeaders(keyAcme))
	id := res.Header.Get("X-Relay-Stream-Id")
	if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	events := msgEvents(t, readAll(t, res))
	want := "message_start content_block_start" + strings.Repeat(" content_block_delta", 5) + " content_block_stop message_delta message_stop"
	last := events[len(events)-2]
	if msgTypes(events) != want || msgText(events) != words(5) || events[0].Message.ID != "msg_"+id ||
		last.Delta.StopReason != "end_turn" || last.Usage.OutputTokens != 5 {
		t.Fatalf("events %s %+v", msgTypes(events), events)
	}
	if req := <-w.reqs; string(req.Body) != fmt.Sprintf(`{"max_tokens":100,"messages":[{"role":"user","content":"hi"}],"model":%q}`, testModel) {
		t.Fatalf("queued body %s", req.Body)
	}

	res = do(t, "POST", edge.url+"/v1/messages", messagesBody(""), anthropicHeaders(keyAcme))
	m := decodeMessage(t, res)
	if res.StatusCode != http.StatusOK || deref(m.StopReason) != "end_turn" || len(m.Content) != 1 || m.Content[0].Text != words(5) ||
		m.ID != "msg_"+res.Header.Get("X-Relay-Stream-Id") || m.Usage.OutputTokens != 5 || m.Error != nil {
		t.Fatalf("Message %d %+v", res.StatusCode, m)
	}
	// The resume token reads it without the key.
	res = do(t, "GET", edge.url+"/v1/messages/"+m.ID+"?token="+res.Header.Get(HeaderResumeToken), "", nil)
	if got := decodeMessage(t, res); res.StatusCode != http.StatusOK || got.ID != m.ID || got.Content[0].Text != words(5) {
		t.Fatalf("with the resume token: %d %+v", res.StatusCode, got)
	}
	// Another tenant does not find it.
	res = do(t, "GET", edge.url+"/v1/messages/"+m.ID, "", anthropicHeaders(keyBeta))
	if got := decodeAnthropicError(t, res); res.StatusCode != http.StatusNotFound || got.Type != "not_found_error" {
		t.Fatalf("another tenant: %d %+v", res.StatusCode, got)
	}
	awaitRunnersExited(t)
}

// TestMessagesEndings: a stream that is not done ends with an error event
// and no message_stop; asked for whole, a cut answer is a 200 with
// stop_reason null and its error, a failed one an HTTP error in
// Anthropic's shape.
func TestMessagesEndings(t *testing.T) {
	for _, tc := range []struct {
		name      string
		script    script
		errType   string
		wholeHTTP int
	}{
		{"incomplete", failing(wire.StatusIncomplete, &wire.Error{Message: "provider overloaded", Type: wire.TypeIncomplete, Code: "upstream_unavailable", Status: 503}),
			"overloaded_error", http.StatusOK},
		{"cancelled", func(wire.Request) []wire.Frame {
			return []wire.Frame{{Kind: wire.KindChunk, Content: "partial"}, cancelledEnd(1)}
		}, "api_error", http.StatusOK},
		{"failed", failing(wire.StatusFailed, &wire.Error{Message: "upstream broke", Type: wire.TypeUpstream, Status: 502}),
			"api_error", http.StatusBadGateway},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.startWorker(&worker{script: tc.script})
			edge := e.startEdge(Config{})
			events := msgEvents(t, readAll(t, do(t, "POST", edge.url+"/v1/messages", messagesBody(`,"stream":true`), nil)))
			last := events[len(events)-1]
			if last.Type != "error" || last.Error.Type != tc.errType || last.id == "" || strings.Contains(msgTypes(events), "message_stop") ||
				strings.Contains(msgTypes(events), "message_delta") || msgText(events) != "partial" {
				t.Fatalf("events %s, last %+v", msgTypes(events), last)
			}

			res := do(t, "POST", edge.url+"/v1/messages", messagesBody(""), nil)
			if res.StatusCode != tc.wholeHTTP {
				t.Fatalf("whole: %d %s", res.StatusCode, readAll(t, res))
			}
			if tc.wholeHTTP != http.StatusOK {
				if got := decodeAnthropicError(t, res); got.Type != tc.errType {
					t.Fatalf("whole: error %+v", got)
				}
				return
			}
			if m := decodeMessage(t, res); m.StopReason != nil || m.Error == nil || m.Error.Type != tc.errType || m.Content[0].Text != "partial" {
				t.Fatalf("whole: %+v", m)
			}
		})
	}
	awaitRunnersExited(t)
}

// TestMessagesErrorShapes: every error on the Messages API's paths has
// Anthropic's shape, the edge's own (authentication, routing, a provider's
// refusal held before the head) included; the other paths keep OpenAI's.
func TestMessagesErrorShapes(t *testing.T) {
	e := newEnv(t)
	e.startWorker(&worker{script: func(wire.Request) []wire.Frame {
		return []wire.Frame{{Kind: wire.KindEnd, Status: wire.StatusFailed,
			Error: &wire.Error{Message: "prompt is too long", Type: "invalid_request_error", Status: http.StatusRequestEntityTooLarge}}}
	}})
	edge := e.startEdge(tenantConfig())
	for _, tc := range []struct {
		name, method, path, body string
		header                   http.Header
		status                   int
		typ                      string
	}{
		{"no key", "POST", "/v1/messages", messagesBody(""), nil, http.StatusUnauthorized, "authentication_error"},
		{"a wrong x-api-key", "POST", "/v1/messages", messagesBody(""), anthropicHeaders("sk-wrong"), http.StatusUnauthorized, "authentication_error"},
		{"a model the key may not use", "POST", "/v1/messages", messagesBody(""), anthropicHeaders(keyBeta), http.StatusNotFound, "not_found_error"},
		{"invalid", "POST", "/v1/messages", fmt.Sprintf(`{"model":%q}`, testModel), anthropicHeaders(keyAcme), http.StatusBadRequest, "invalid_request_error"},
		{"wrong method", "PUT", "/v1/messages", "", anthropicHeaders(keyAcme), http.StatusMethodNotAllowed, "invalid_request_error"},
		{"unknown path", "POST", "/v1/messages/batches/x/y", "{}", anthropicHeaders(keyAcme), http.StatusNotFound, "not_found_error"},
		{"a refusal, streamed", "POST", "/v1/messages", messagesBody(`,"stream":true`), bearerHeader(keyAcme), http.StatusRequestEntityTooLarge, "request_too_large"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := do(t, tc.method, edge.url+tc.path, tc.body, tc.header)
			if got := decodeAnthropicError(t, res); res.StatusCode != tc.status || got.Type != tc.typ {
				t.Fatalf("%d %+v", res.StatusCode, got)
			}
		})
	}
	// X-Api-Key is the Messages API's; elsewhere OpenAI's shape and key.
	res := do(t, "POST", edge.url+"/v1/chat/completions", chatBody(false, "hi"), anthropicHeaders(keyAcme))
	if got := decodeError(t, res); res.StatusCode != http.StatusUnauthorized || got.Code != CodeInvalidAPIKey {
		t.Fatalf("chat with X-Api-Key: %d %+v", res.StatusCode, got)
	}
}

// TestMessagesPingAndResume: a waiting stream sends Anthropic's ping, which
// has no id; a client that loses its connection resumes after the last
// id it got, on another edge, and gets the rest exactly once.
func TestMessagesPingAndResume(t *testing.T) {
	e := newEnv(t)
	w := e.startWorker(&worker{script: answer(4), gate: make(chan struct{})})
	edge1 := e.startEdge(Config{Keepalive: 50 * time.Millisecond})
	edge2 := e.startEdge(Config{})
	// Without a frame within a keepalive interval, the head goes.
	res := do(t, "POST", edge1.url+"/v1/messages", messagesBody(`,"stream":true`), nil)
	r := bufio.NewReader(res.Body)
	seen := readEvents(t, r, func(ev sseEvent) bool { return ev.Event == "ping" })
	w.gate <- struct{}{}
	w.gate <- struct{}{}
	seen = append(seen, readEvents(t, r, func(ev sseEvent) bool { return strings.Contains(ev.Data, `"text":"w2 "`) })...)
	res.Body.Close()
	var lastID string
	for _, ev := range seen {
		if ev.Event == "ping" && (ev.ID != "" || ev.Data != `{"type":"ping"}`) {
			t.Fatalf("ping %+v", ev)
		}
		if ev.ID != "" {
			lastID = ev.ID
		}
	}

	rest := do(t, "GET", edge2.url+"/v1/messages/msg_"+res.Header.Get("X-Relay-Stream-Id"), "", http.Header{"Last-Event-ID": {lastID}})
	close(w.gate)
	events := msgEvents(t, readAll(t, rest))
	if got := "w1 w2 " + msgText(events); got != words(4) || events[0].id != fmt.Sprint(mustAtoi(t, lastID)+1) ||
		events[len(events)-1].Type != "message_stop" {
		t.Fatalf("resumed after %s: %q, events %s", lastID, got, msgTypes(events))
	}
	awaitRunnersExited(t)
}

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	var n int
	if _, err := fmt.Sscan(s, &n); err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	return n
}

// TestMessagesCountTokens estimates from the translated request and
// refuses what a Messages request refuses.
func TestMessagesCountTokens(t *testing.T) {
	e := newEnv(t)
	edge := e.startEdge(Config{})
	body := fmt.Sprintf(`{"model":%q,"system":"be brief","messages":[{"role":"user","content":%q}]}`, testModel, strings.Repeat("word ", 100))
	res := do(t, "POST", edge.url+"/v1/messages/count_tokens", body, nil)
	var got anthropic.TokenCount
	if err := jsonDecode(res, &got); err != nil || res.StatusCode != http.StatusOK || got.InputTokens < 125 || got.InputTokens > 200 {
		t.Fatalf("%d %+v %v", res.StatusCode, got, err)
	}
	res = do(t, "POST", edge.url+"/v1/messages/count_tokens", `{"model":"nope","messages":[{"role":"user","content":"x"}]}`, nil)
	if got := decodeAnthropicError(t, res); res.StatusCode != http.StatusNotFound || got.Type != "not_found_error" {
		t.Fatalf("unknown model: %d %+v", res.StatusCode, got)
	}
}

// TestMessagesSDKRetryAttaches: Anthropic's SDK retries a failed request
// as the OpenAI SDKs do (X-Stainless-Retry-Count, no idempotency key): the
// retry of a failed answer is served the same stream, which is not
// generated again.
func TestMessagesSDKRetryAttaches(t *testing.T) {
	e := newEnv(t)
	w := e.startWorker(&worker{script: failing(wire.StatusFailed, &wire.Error{Message: "provider down", Type: wire.TypeUpstream, Status: http.StatusBadGateway})})
	edge := e.startEdge(Config{})
	var ids []string
	for _, n := range []string{"0", "1", "2"} {
		res := do(t, "POST", edge.url+"/v1/messages", messagesBody(""), http.Header{HeaderSDKRetryCount: {n}})
		if got := decodeAnthropicError(t, res); res.StatusCode != http.StatusBadGateway || got.Type != "api_error" {
			t.Fatalf("attempt %s: %d %+v", n, res.StatusCode, got)
		}
		ids = append(ids, res.Header.Get("X-Relay-Stream-Id"))
	}
	if ids[0] == "" || ids[1] != ids[0] || ids[2] != ids[0] {
		t.Fatalf("streams %v, want one", ids)
	}
	if n := len(w.reqs); n != 1 {
		t.Fatalf("%d generations queued, want 1", n)
	}
	awaitRunnersExited(t)
}
