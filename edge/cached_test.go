package edge

import (
	"net/http"
	"strings"
	"testing"

	"github.com/relaydev/relay/relay/dialect/chat"
	"github.com/relaydev/relay/relay/wire"
)

// cachedAnswer is answer(n), replayed from the cache (every frame marked)
// for a request that says "cached".
func cachedAnswer(n int) script {
	return func(req wire.Request) []wire.Frame {
		frames := answer(n)(req)
		for i := range frames {
			frames[i].Cached = strings.Contains(string(req.Body), "cached")
		}
		return frames
	}
}

// An answer the worker replayed from the cache says so: X-Relay-Cache: hit
// on the response, relay.status "cached" in every chunk and in the end of
// a stream, and in a whole completion; the Responses and Messages
// dialects send the header. A fresh answer has neither.
func TestCachedAnswerIsMarked(t *testing.T) {
	e := newEnv(t)
	e.startWorker(&worker{script: cachedAnswer(3)})
	edge := e.startEdge(Config{})

	var whole chat.Completion
	res := do(t, http.MethodPost, edge.url+"/v1/chat/completions", chatBody(false, "cached"), nil)
	if err := jsonDecode(res, &whole); err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK || res.Header.Get(HeaderCache) != "hit" || whole.Relay.Status != chat.StatusCached ||
		*whole.Choices[0].Message.Content != "w1 w2 w3 " || *whole.Choices[0].FinishReason != "stop" {
		t.Fatalf("whole completion: %d, %s %q, %+v", res.StatusCode, HeaderCache, res.Header.Get(HeaderCache), whole)
	}

	res = do(t, http.MethodPost, edge.url+"/v1/chat/completions", chatBody(true, "cached"), nil)
	body := readAll(t, res)
	if res.Header.Get(HeaderCache) != "hit" {
		t.Errorf("streamed: %s %q, want hit", HeaderCache, res.Header.Get(HeaderCache))
	}
	events := frameEvents(parseSSE(t, body))
	if len(events) != 4 {
		t.Fatalf("%d frame events, want 4: %s", len(events), body)
	}
	for _, ev := range events {
		if c := decodeChunk(t, ev.Data); c.Relay.Status != chat.StatusCached {
			t.Errorf("event %s: relay.status %q, want cached", ev.ID, c.Relay.Status)
		}
	}

	for path, body := range map[string]string{
		"/v1/responses": `{"model":"` + testModel + `","input":"cached"}`,
		"/v1/messages":  `{"model":"` + testModel + `","max_tokens":100,"messages":[{"role":"user","content":"cached"}]}`,
	} {
		res := do(t, http.MethodPost, edge.url+path, body, http.Header{"Content-Type": {"application/json"}})
		readAll(t, res)
		if res.StatusCode != http.StatusOK || res.Header.Get(HeaderCache) != "hit" {
			t.Errorf("%s: %d, %s %q, want hit", path, res.StatusCode, HeaderCache, res.Header.Get(HeaderCache))
		}
	}

	res = do(t, http.MethodPost, edge.url+"/v1/chat/completions", chatBody(false, "hi"), nil)
	whole = chat.Completion{}
	if err := jsonDecode(res, &whole); err != nil {
		t.Fatal(err)
	}
	if res.Header.Get(HeaderCache) != "" || whole.Relay.Status != wire.StatusDone {
		t.Errorf("a fresh answer: %s %q, relay.status %q", HeaderCache, res.Header.Get(HeaderCache), whole.Relay.Status)
	}
}
