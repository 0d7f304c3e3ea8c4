package edge

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/relaydev/relay/relay/wire"
)

// uiBody is useChat's POST body for chat id with one user message.
func uiBody(id, text string) string {
	return fmt.Sprintf(`{"id":%q,"trigger":"submit-message","model":%q,"messages":[{"id":"u1","role":"user","parts":[{"type":"text","text":%q}]}]}`, id, testModel, text)
}

// uiChunk is a UI message chunk as the tests read it.
type uiChunk struct {
	Type         string `json:"type"`
	ID           string `json:"id"`
	Delta        string `json:"delta"`
	MessageID    string `json:"messageId"`
	FinishReason string `json:"finishReason"`
	ErrorText    string `json:"errorText"`
	Reason       string `json:"reason"`
}

// uiChunks are the chunks of a UI message stream's SSE events, which end
// with [DONE]; it reports whether they did.
func uiChunks(t *testing.T, events []sseEvent) (chunks []uiChunk, done bool) {
	t.Helper()
	for _, ev := range events {
		switch {
		case ev.Data == "[DONE]":
			return chunks, true
		case ev.Data != "":
			if ev.ID != "" || ev.Event != "" {
				t.Fatalf("event with an id or a type: %+v", ev)
			}
			var c uiChunk
			if err := json.Unmarshal([]byte(ev.Data), &c); err != nil {
				t.Fatalf("chunk %q: %v", ev.Data, err)
			}
			chunks = append(chunks, c)
		}
	}
	return chunks, false
}

// uiText is the text the chunks' text deltas spell, and the last chunk's
// type.
func uiText(chunks []uiChunk) (text, last string) {
	var b strings.Builder
	for _, c := range chunks {
		if c.Type == "text-delta" {
			b.WriteString(c.Delta)
		}
	}
	if len(chunks) > 0 {
		last = chunks[len(chunks)-1].Type
	}
	return b.String(), last
}

// untilType stops readEvents at the first chunk of type typ.
func untilType(typ string) func(sseEvent) bool {
	return func(ev sseEvent) bool { return strings.Contains(ev.Data, `"type":"`+typ+`"`) }
}

// TestChatsStreamsUIMessages: useChat's POST is answered with the UI
// message stream of the whole answer, finished, then [DONE], with the
// header the AI SDK looks for; the model comes from the body, else from
// edge.chat_model.
func TestChatsStreamsUIMessages(t *testing.T) {
	e := newEnv(t)
	e.startWorker(&worker{script: answer(3)})
	edge := e.startEdge(Config{ChatModel: otherModel})

	res := do(t, "POST", edge.url+"/v1/chats", uiBody("chat-1", "hi"), nil)
	id := res.Header.Get("X-Relay-Stream-Id")
	if res.StatusCode != http.StatusOK || res.Header.Get("X-Vercel-AI-UI-Message-Stream") != "v1" ||
		res.Header.Get("Content-Type") != "text/event-stream" || id == "" {
		t.Fatalf("%d %v", res.StatusCode, res.Header)
	}
	chunks, done := uiChunks(t, parseSSE(t, readAll(t, res)))
	text, last := uiText(chunks)
	if !done || text != words(3) || last != "finish" || chunks[len(chunks)-1].FinishReason != "stop" {
		t.Fatalf("text %q, last %s, done %v: %+v", text, last, done, chunks)
	}
	if chunks[0].Type != "start" || chunks[0].MessageID != "msg_"+id {
		t.Fatalf("first chunk %+v", chunks[0])
	}
	if meta, _ := e.meta(id); meta.Model != testModel {
		t.Fatalf("model %q, want the body's", meta.Model)
	}
	// Location reads the same chunks as a Durable Stream.
	loc := res.Header.Get("Location")
	if loc != "/ds/generations/"+id+"?dialect=ui" || res.Header.Get(HeaderResumeToken) == "" {
		t.Fatalf("Location %q, resume token %q", loc, res.Header.Get(HeaderResumeToken))
	}
	ds := do(t, "GET", edge.url+loc+"&offset=-1", "", nil)
	var stored []uiChunk
	if err := jsonDecode(ds, &stored); err != nil || ds.Header.Get("Stream-Closed") != "true" || len(stored) != len(chunks) {
		t.Fatalf("the Location's stream: %v, closed %q, %d chunks, want %d", err, ds.Header.Get("Stream-Closed"), len(stored), len(chunks))
	}
	for i := range stored {
		if stored[i] != chunks[i] {
			t.Fatalf("chunk %d: %+v in the Durable Stream, %+v in the response", i, stored[i], chunks[i])
		}
	}

	noModel := `{"id":"chat-2","messages":[{"role":"user","parts":[{"type":"text","text":"hi"}]}]}`
	res = do(t, "POST", edge.url+"/v1/chats", noModel, nil)
	readAll(t, res)
	if meta, _ := e.meta(res.Header.Get("X-Relay-Stream-Id")); res.StatusCode != http.StatusOK || meta.Model != otherModel {
		t.Fatalf("without a model: %d, model %q", res.StatusCode, meta.Model)
	}
}

// TestChatsRefusals: what the dialect or the chat checks refuse is an
// OpenAI-style 400 naming the field, and starts nothing.
func TestChatsRefusals(t *testing.T) {
	e := newEnv(t)
	edge := e.startEdge(Config{})
	for body, param := range map[string]string{
		`{"id":"c","messages":[{"role":"user","parts":[{"type":"text","text":"x"}]}]}`:                                                   "model",
		`{"id":"c","model":"nope","messages":[{"role":"user","parts":[{"type":"text","text":"x"}]}]}`:                                    "model",
		`{"messages":[{"role":"user","parts":[{"type":"text","text":"x"}]}],"model":"` + testModel + `"}`:                                "id",
		`{"id":"c","model":"` + testModel + `","messages":[{"role":"user","parts":[{"type":"file","mediaType":"text/csv","url":"x"}]}]}`: "messages[0].parts[0].mediaType",
	} {
		res := do(t, "POST", edge.url+"/v1/chats", body, nil)
		var got struct{ Error wire.Error }
		if err := jsonDecode(res, &got); err != nil || res.StatusCode/100 != 4 || got.Error.Param != param {
			t.Errorf("%s: %d %+v (%v), want an error on %s", body, res.StatusCode, got.Error, err, param)
		}
	}
	res := do(t, "POST", edge.url+"/v1/chats", uiBody("c", "x"), http.Header{HeaderOnBusy: {"maybe"}})
	if res.StatusCode != http.StatusBadRequest {
		t.Fatalf("%s maybe: %d", HeaderOnBusy, res.StatusCode)
	}
}

// TestChatsResumeFromTheStart: a page that reloads mid-answer asks GET
// /v1/chats/{id}/stream and is served the answer from its start, live to
// its end, exactly once; once it ended, and for a chat that never ran,
// the answer is 204.
func TestChatsResumeFromTheStart(t *testing.T) {
	e := newEnv(t)
	w := e.startWorker(&worker{script: answer(4), gate: make(chan struct{}, 1)})
	edge := e.startEdge(Config{})

	if res := do(t, "GET", edge.url+"/v1/chats/never/stream", "", nil); res.StatusCode != http.StatusNoContent {
		t.Fatalf("a chat that never ran: %d", res.StatusCode)
	}
	w.gate <- struct{}{}
	post := do(t, "POST", edge.url+"/v1/chats", uiBody("chat-r", "hi"), nil)
	w.gate <- struct{}{}
	readEvents(t, bufio.NewReader(post.Body), func(ev sseEvent) bool { return strings.Contains(ev.Data, "w2 ") })
	post.Body.Close() // the page reloads: a disconnect, not a stop

	res := do(t, "GET", edge.url+"/v1/chats/chat-r/stream", "", nil)
	if res.StatusCode != http.StatusOK || res.Header.Get("X-Vercel-AI-UI-Message-Stream") != "v1" {
		t.Fatalf("resume: %d %v", res.StatusCode, res.Header)
	}
	r := bufio.NewReader(res.Body)
	got := readEvents(t, r, func(ev sseEvent) bool { return strings.Contains(ev.Data, "w2 ") })
	for range 3 {
		w.gate <- struct{}{}
	}
	rest := parseSSE(t, readAll(t, &http.Response{Body: readCloser{r}}))
	chunks, done := uiChunks(t, append(got, rest...))
	if text, last := uiText(chunks); !done || text != words(4) || last != "finish" || chunks[0].Type != "start" {
		t.Fatalf("resumed text %q, last %s, done %v", text, last, done)
	}
	if res := do(t, "GET", edge.url+"/v1/chats/chat-r/stream", "", nil); res.StatusCode != http.StatusNoContent {
		t.Fatalf("after the end: %d", res.StatusCode)
	}
}

// TestChatsResumeWithSnapshot: with snapshot=true a reloaded page gets
// what was said so far as one text delta, then the live deltas, and the
// whole answer once.
func TestChatsResumeWithSnapshot(t *testing.T) {
	e := newEnv(t)
	w := e.startWorker(&worker{script: answer(4), gate: make(chan struct{}, 1)})
	edge := e.startEdge(Config{})

	w.gate <- struct{}{}
	post := do(t, "POST", edge.url+"/v1/chats", uiBody("chat-s", "hi"), nil)
	w.gate <- struct{}{}
	readEvents(t, bufio.NewReader(post.Body), func(ev sseEvent) bool { return strings.Contains(ev.Data, "w2 ") })
	post.Body.Close()

	if res := do(t, "GET", edge.url+"/v1/chats/chat-s/stream?snapshot=maybe", "", nil); res.StatusCode != http.StatusBadRequest {
		t.Fatalf("snapshot=maybe: %d", res.StatusCode)
	}
	res := do(t, "GET", edge.url+"/v1/chats/chat-s/stream?snapshot=true", "", nil)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("resume: %d", res.StatusCode)
	}
	r := bufio.NewReader(res.Body)
	got := readEvents(t, r, untilType("text-delta"))
	for range 3 {
		w.gate <- struct{}{}
	}
	rest := parseSSE(t, readAll(t, &http.Response{Body: readCloser{r}}))
	chunks, done := uiChunks(t, append(got, rest...))
	var deltas []string
	for _, c := range chunks {
		if c.Type == "text-delta" {
			deltas = append(deltas, c.Delta)
		}
	}
	if text, last := uiText(chunks); !done || text != words(4) || last != "finish" || chunks[0].Type != "start" {
		t.Fatalf("resumed text %q, last %s, done %v", text, last, done)
	}
	if len(deltas) != 3 || deltas[0] != "w1 w2 " {
		t.Fatalf("deltas %q: want the first two words folded into one, then one delta a word", deltas)
	}
}

// TestChatsOneLiveGeneration: a second submit while the chat's
// generation runs is a 409 naming the live stream, or, with
// X-Relay-On-Busy: attach, is served it; once it ended, a submit starts a
// new generation. Every edge sees the pointer.
func TestChatsOneLiveGeneration(t *testing.T) {
	e := newEnv(t)
	w := e.startWorker(&worker{script: answer(2), gate: make(chan struct{}, 1)})
	a, b := e.startEdge(Config{}), e.startEdge(Config{})

	w.gate <- struct{}{}
	first := do(t, "POST", a.url+"/v1/chats", uiBody("chat-b", "hi"), nil)
	id := first.Header.Get("X-Relay-Stream-Id")

	busy := do(t, "POST", b.url+"/v1/chats", uiBody("chat-b", "again"), nil)
	var got struct{ Error wire.Error }
	if err := jsonDecode(busy, &got); err != nil || busy.StatusCode != http.StatusConflict || got.Error.Code != CodeChatBusy ||
		busy.Header.Get("X-Relay-Stream-Id") != id {
		t.Fatalf("second submit: %d %+v %v", busy.StatusCode, got.Error, busy.Header)
	}
	attached := do(t, "POST", b.url+"/v1/chats", uiBody("chat-b", "again"), http.Header{HeaderOnBusy: {"attach"}})
	if attached.StatusCode != http.StatusOK || attached.Header.Get("X-Relay-Stream-Id") != id {
		t.Fatalf("attach: %d %v", attached.StatusCode, attached.Header)
	}
	w.gate <- struct{}{}
	w.gate <- struct{}{}
	for _, res := range []*http.Response{first, attached} {
		chunks, done := uiChunks(t, parseSSE(t, readAll(t, res)))
		if text, last := uiText(chunks); !done || text != words(2) || last != "finish" {
			t.Fatalf("text %q, last %s", text, last)
		}
	}
	if n := len(w.reqs); n != 1 {
		t.Fatalf("%d generations, want 1", n)
	}

	w.gate <- struct{}{}
	next := do(t, "POST", b.url+"/v1/chats", uiBody("chat-b", "next"), nil)
	if next.StatusCode != http.StatusOK || next.Header.Get("X-Relay-Stream-Id") == id {
		t.Fatalf("after the end: %d, stream %s (the first was %s)", next.StatusCode, next.Header.Get("X-Relay-Stream-Id"), id)
	}
	w.gate <- struct{}{}
	w.gate <- struct{}{}
	readAll(t, next)
}

// TestChatsStop: the stop request cancels the chat's generation through
// the cancel path: the worker stops, the POST's stream ends with abort
// (never finish), and the chat has nothing live after it; a stop with
// nothing running is a 204.
func TestChatsStop(t *testing.T) {
	e := newEnv(t)
	w := e.startWorker(&worker{script: answer(10), gate: make(chan struct{}, 1)})
	edge := e.startEdge(Config{})

	if res := do(t, "POST", edge.url+"/v1/chats/idle/stop", "", nil); res.StatusCode != http.StatusNoContent {
		t.Fatalf("stop of an idle chat: %d", res.StatusCode)
	}
	w.gate <- struct{}{}
	post := do(t, "POST", edge.url+"/v1/chats", uiBody("chat-s", "hi"), nil)
	id := post.Header.Get("X-Relay-Stream-Id")
	r := bufio.NewReader(post.Body)
	readEvents(t, r, untilType("text-delta"))

	stop := do(t, "POST", edge.url+"/v1/chats/chat-s/stop", "", nil)
	if body := readAll(t, stop); stop.StatusCode != http.StatusOK || body != cancelBody(id, wire.StatusCancelled) {
		t.Fatalf("stop: %d %s", stop.StatusCode, body)
	}
	if got := <-w.cancelled; got != id {
		t.Fatalf("worker cancelled %s", got)
	}
	chunks, done := uiChunks(t, parseSSE(t, readAll(t, &http.Response{Body: readCloser{r}})))
	if _, last := uiText(chunks); !done || last != "abort" {
		t.Fatalf("after stop the stream ends with %s (done %v): %+v", last, done, chunks)
	}
	if res := do(t, "GET", edge.url+"/v1/chats/chat-s/stream", "", nil); res.StatusCode != http.StatusNoContent {
		t.Fatalf("after stop: %d", res.StatusCode)
	}
	if res := do(t, "DELETE", edge.url+"/v1/chats/chat-s/stream", "", nil); res.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE after stop: %d", res.StatusCode)
	}
}

// TestChatsFailedEnd: an answer cut by the provider ends with an error
// chunk, never finish.
func TestChatsFailedEnd(t *testing.T) {
	e := newEnv(t)
	e.startWorker(&worker{script: failing(wire.StatusIncomplete, &wire.Error{Message: "provider gone", Type: wire.TypeIncomplete, Code: wire.CodeRetriesExhausted})})
	edge := e.startEdge(Config{})
	res := do(t, "POST", edge.url+"/v1/chats", uiBody("chat-f", "hi"), nil)
	chunks, done := uiChunks(t, parseSSE(t, readAll(t, res)))
	text, last := uiText(chunks)
	if !done || text != "partial" || last != "error" || chunks[len(chunks)-1].ErrorText != "provider gone" {
		t.Fatalf("text %q, last %s: %+v", text, last, chunks)
	}
}
