package mockupstream

import (
	"encoding/json"
	"flag"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

func TestStreamShape(t *testing.T) {
	_, ts := newTestServer(t, fullSpeed(7))
	msgs := conv("shape")
	r := stream(t, ts, chatBody(true, msgs))
	if r.status != http.StatusOK || !strings.HasPrefix(r.header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("status %d, Content-Type %q", r.status, r.header.Get("Content-Type"))
	}
	if r.err != nil || len(r.malformed) != 0 || !r.done {
		t.Fatalf("err %v, malformed %q, done %v", r.err, r.malformed, r.done)
	}
	// role chunk, 7 content chunks, finish chunk, usage chunk
	if len(r.chunks) != 10 {
		t.Fatalf("%d chunks, want 10", len(r.chunks))
	}
	first := r.chunks[0].Choices[0].Delta
	if first.Role == nil || *first.Role != "assistant" || first.Content == nil || *first.Content != "" {
		t.Fatalf("first delta = %+v, want role assistant and empty content", first)
	}
	for i, c := range r.chunks {
		if c.Object != "chat.completion.chunk" || c.ID != r.chunks[0].ID || c.Model != "mock-1" {
			t.Fatalf("chunk %d: object %q id %q model %q", i, c.Object, c.ID, c.Model)
		}
	}
	if got, want := r.content(), Answer(msgs, 7); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("content chunks = %q, want one per token %q", got, want)
	}
	last := r.chunks[8].Choices[0]
	if last.FinishReason == nil || *last.FinishReason != "stop" || last.Delta.Content != nil || last.Delta.Role != nil {
		t.Fatalf("finish chunk = %+v, want an empty delta and stop", last)
	}
	u := r.chunks[9]
	if len(u.Choices) != 0 || u.Usage == nil || u.Usage.CompletionTokens != 7 || u.Usage.PromptTokens <= 0 ||
		u.Usage.TotalTokens != u.Usage.PromptTokens+7 {
		t.Fatalf("usage chunk = %+v", u)
	}
}

func TestStreamWithoutUsage(t *testing.T) {
	_, ts := newTestServer(t, fullSpeed(3))
	body := chatBody(true, conv("no usage"))
	delete(body, "stream_options")
	r := stream(t, ts, body)
	if r.usage() != nil || len(r.chunks) != 5 || !r.done {
		t.Fatalf("usage %+v, %d chunks, done %v; want no usage, 5 chunks, done", r.usage(), len(r.chunks), r.done)
	}
}

// TestStreamGolden pins the exact wire output, byte for byte.
func TestStreamGolden(t *testing.T) {
	s, ts := newTestServer(t, fullSpeed(4))
	s.now = func() time.Time { return time.Unix(1700000000, 0) }
	resp := post(t, ts, "/v1/chat/completions", "", chatBody(true, conv("golden")))
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "stream.golden")
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Fatalf("wire output differs from %s (run with -update to accept):\n%s", golden, got)
	}
}

func TestNonStreaming(t *testing.T) {
	_, ts := newTestServer(t, fullSpeed(9))
	msgs := conv("not streamed")
	resp := post(t, ts, "/v1/chat/completions", "", chatBody(false, msgs))
	var c struct {
		Object  string `json:"object"`
		Model   string `json:"model"`
		Choices []struct {
			Message      Message `json:"message"`
			FinishReason string  `json:"finish_reason"`
		} `json:"choices"`
		Usage wireUsage `json:"usage"`
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(&c); err != nil {
		t.Fatal(err)
	}
	if c.Object != "chat.completion" || c.Model != "mock-1" || len(c.Choices) != 1 {
		t.Fatalf("completion = %+v", c)
	}
	ch := c.Choices[0]
	if ch.Message.Role != "assistant" || ch.Message.Content != AnswerText(msgs, 9) || ch.FinishReason != "stop" {
		t.Fatalf("choice = %+v, want the answer %q", ch, AnswerText(msgs, 9))
	}
	if c.Usage.CompletionTokens != 9 || c.Usage.TotalTokens != c.Usage.PromptTokens+9 {
		t.Fatalf("usage = %+v", c.Usage)
	}
}

func TestMaxTokensCutsWithLength(t *testing.T) {
	_, ts := newTestServer(t, fullSpeed(10))
	msgs := conv("limited")
	for _, field := range []string{"max_tokens", "max_completion_tokens"} {
		r := stream(t, ts, chatBody(true, msgs, field, 4))
		if r.text() != strings.Join(Answer(msgs, 4), "") || r.finish() != "length" || r.usage().CompletionTokens != 4 {
			t.Fatalf("%s=4: text %q, finish %q, usage %+v", field, r.text(), r.finish(), r.usage())
		}
	}
	// A limit the answer fits in changes nothing.
	if r := stream(t, ts, chatBody(true, msgs, "max_tokens", 10)); r.finish() != "stop" || len(r.content()) != 10 {
		t.Fatalf("max_tokens=10: finish %q, %d chunks", r.finish(), len(r.content()))
	}
	e := decodeError(t, post(t, ts, "/v1/chat/completions", "", chatBody(true, msgs, "max_tokens", 0)), http.StatusBadRequest)
	if e.Error.Param == nil || *e.Error.Param != "max_tokens" {
		t.Fatalf("param = %v, want max_tokens", e.Error.Param)
	}
}

func TestContentParts(t *testing.T) {
	_, ts := newTestServer(t, fullSpeed(5))
	body := chatBody(true, nil)
	body["messages"] = []map[string]any{
		{"role": "system", "content": "You are a mock."},
		{"role": "user", "content": []map[string]any{{"type": "text", "text": "in "}, {"type": "text", "text": "parts"}}},
	}
	if r := stream(t, ts, body); r.text() != AnswerText(conv("in parts"), 5) {
		t.Fatalf("text = %q, want the answer to the joined parts", r.text())
	}
}

func TestBadRequests(t *testing.T) {
	_, ts := newTestServer(t, fullSpeed(5))
	e := decodeError(t, post(t, ts, "/v1/chat/completions", "", chatBody(true, conv("x"), "model", "gpt-4o")), http.StatusNotFound)
	if e.Error.Code == nil || *e.Error.Code != "model_not_found" {
		t.Fatalf("unknown model: %+v", e)
	}
	decodeError(t, post(t, ts, "/v1/chat/completions", "", chatBody(true, nil)), http.StatusBadRequest)
	decodeError(t, post(t, ts, "/v1/chat/completions", "", "not an object"), http.StatusBadRequest)
	e = decodeError(t, post(t, ts, "/chat/completions", "", chatBody(true, conv("x"))), http.StatusNotFound)
	if !strings.Contains(e.Error.Message, "Invalid URL (POST /chat/completions)") {
		t.Fatalf("unknown path: %+v", e)
	}
}

func TestModels(t *testing.T) {
	_, ts := newTestServer(t, Config{Models: []string{"a", "b", "c"}})
	resp, err := ts.Client().Get(ts.URL + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct {
		Object string `json:"object"`
		Data   []struct {
			ID     string `json:"id"`
			Object string `json:"object"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	if list.Object != "list" || len(list.Data) != 3 || list.Data[2].ID != "c" || list.Data[2].Object != "model" {
		t.Fatalf("models = %+v", list)
	}
}
