package edge

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/relaydev/relay/relay/wire"
)

// dsHeader is h with a Content-Type for a Durable Stream's body.
func dsHeader(h http.Header, contentType string) http.Header {
	out := http.Header{"Content-Type": {contentType}}
	for k, v := range h {
		out[k] = v
	}
	return out
}

// A Durable Stream belongs to the tenant whose key created it: another
// tenant's same path is another stream, a request without a key is
// refused, and the stream's resume token reads it (and only it), there
// and on GET /v1/streams/{id}. Its id names a partition of Durable
// Streams.
func TestDurableStreamsBelongToTheirTenant(t *testing.T) {
	e := newEnv(t)
	edge := e.startEdge(tenantConfig())
	u := edge.url + "/ds/chat/1"
	acme, beta := bearerHeader(keyAcme), bearerHeader(keyBeta)

	res := do(t, http.MethodPut, u, "acme's ", dsHeader(acme, "text/plain"))
	if res.StatusCode != http.StatusCreated {
		t.Fatalf("PUT: %d %s", res.StatusCode, readAll(t, res))
	}
	id, token := res.Header.Get("X-Relay-Stream-Id"), res.Header.Get(HeaderResumeToken)
	if !wire.ValidStreamID(id) || wire.ValidGenerationID(id) || token == "" {
		t.Fatalf("PUT answered stream id %q and token %q, want a Durable Stream's id", id, token)
	}
	if res := do(t, http.MethodPost, u, "words", dsHeader(acme, "text/plain")); res.StatusCode != http.StatusNoContent {
		t.Fatalf("POST: %d %s", res.StatusCode, readAll(t, res))
	}
	if res := do(t, http.MethodGet, u, "", beta); res.StatusCode != http.StatusNotFound {
		t.Fatalf("another tenant's GET: %d, want 404", res.StatusCode)
	}
	if res := do(t, http.MethodGet, u, "", nil); res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("GET without a key: %d, want 401", res.StatusCode)
	}
	res = do(t, http.MethodPut, u, "beta's", dsHeader(beta, "text/plain"))
	if res.StatusCode != http.StatusCreated || res.Header.Get("X-Relay-Stream-Id") == id {
		t.Fatalf("another tenant's PUT of the path: %d, stream %s; want 201 and a stream of its own", res.StatusCode, res.Header.Get("X-Relay-Stream-Id"))
	}
	betaToken := res.Header.Get(HeaderResumeToken)

	if res := do(t, http.MethodGet, u+"?token="+url.QueryEscape(token), "", nil); res.StatusCode != http.StatusOK || readAll(t, res) != "acme's words" {
		t.Fatalf("GET with the token: %d", res.StatusCode)
	}
	if res := do(t, http.MethodGet, u+"?token="+url.QueryEscape(betaToken[:len(betaToken)-2]+"AA"), "", nil); res.StatusCode != http.StatusForbidden {
		t.Fatalf("GET with a forged token: %d, want 403", res.StatusCode)
	}
	closing := dsHeader(acme, "text/plain")
	closing.Set("Stream-Closed", "true")
	if res := do(t, http.MethodPost, u, "", closing); res.StatusCode != http.StatusNoContent {
		t.Fatalf("close: %d", res.StatusCode)
	}
	res = do(t, http.MethodGet, edge.url+"/v1/streams/"+id+"?token="+url.QueryEscape(token), "", nil)
	body := readAll(t, res)
	var text string
	for _, ev := range parseSSE(t, body) {
		if ev.Data == "" || ev.Data == "[DONE]" {
			continue
		}
		if c := decodeChunk(t, ev.Data).Choices[0].Delta.Content; c != nil {
			text += *c
		}
	}
	if res.StatusCode != http.StatusOK || text != "acme's words" {
		t.Fatalf("GET /v1/streams/%s: %d, text %q", id, res.StatusCode, text)
	}
}

// A body past edge.durable_streams.max_append_bytes is a 413.
func TestDurableStreamsBoundTheBody(t *testing.T) {
	e := newEnv(t)
	edge := e.startEdge(Config{DurableStreams: DurableStreamsConfig{MaxAppendBytes: 1024}})
	u := edge.url + "/ds/big"
	if res := do(t, http.MethodPut, u, "", dsHeader(nil, "application/octet-stream")); res.StatusCode != http.StatusCreated {
		t.Fatalf("PUT: %d", res.StatusCode)
	}
	res := do(t, http.MethodPost, u, strings.Repeat("x", 1025), dsHeader(nil, "application/octet-stream"))
	if res.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("POST of 1025 bytes: %d, want 413", res.StatusCode)
	}
	if res := do(t, http.MethodPost, u, strings.Repeat("x", 1024), dsHeader(nil, "application/octet-stream")); res.StatusCode != http.StatusNoContent {
		t.Fatalf("POST of 1024 bytes: %d, want 204", res.StatusCode)
	}
}

// A body far past the bound, sent whole by a client that reads the answer
// only once it has written the body (Go's http.Transport, on a connection
// of its own each time), gets the 413 and its JSON error, every time: the
// edge reads the rest of the body before it closes the connection, where
// closing under it would reset the connection and the client would see
// only the reset.
func TestDurableStreamsAnswerAHugeBodyReadably(t *testing.T) {
	e := newEnv(t)
	edge := e.startEdge(Config{})
	u := edge.url + "/ds/huge"
	if res := do(t, http.MethodPut, u, "", dsHeader(nil, "application/octet-stream")); res.StatusCode != http.StatusCreated {
		t.Fatalf("PUT: %d", res.StatusCode)
	}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	defer client.CloseIdleConnections()
	body := bytes.Repeat([]byte("x"), 10<<20)
	for i := range 8 {
		req, err := http.NewRequest(http.MethodPost, u, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/octet-stream")
		res, err := client.Do(req)
		if err != nil {
			t.Fatalf("POST %d of 10 MiB: %v, want a 413", i, err)
		}
		got := decodeError(t, res)
		res.Body.Close()
		if res.StatusCode != http.StatusRequestEntityTooLarge || got.Code != "body_too_large" {
			t.Fatalf("POST %d of 10 MiB: %d %+v, want 413 body_too_large", i, res.StatusCode, got)
		}
	}
}

// A generation reads as a closed JSON Durable Stream of its chat chunks,
// the last one its finish; it takes no writes, and reads on from an
// offset. A Durable Stream's id names no generation.
func TestDurableStreamsServeGenerations(t *testing.T) {
	e := newEnv(t)
	edge := e.startEdge(Config{})
	id := wire.NewStreamID()
	e.writeStream(id, wire.Meta{Model: testModel, Created: time.Now().Unix()}, []wire.Frame{
		{Kind: wire.KindChunk, Seq: 1, Role: "assistant", Content: "Hello"},
		{Kind: wire.KindChunk, Seq: 2, Content: " there"},
		{Kind: wire.KindEnd, Seq: 3, Status: wire.StatusDone, FinishReason: "stop", Usage: &wire.Usage{PromptTokens: 1, CompletionTokens: 2, TotalTokens: 3}},
	})
	u := edge.url + "/ds/generations/" + id

	res := do(t, http.MethodGet, u, "", nil)
	var chunks []chunkEvent
	if err := json.Unmarshal([]byte(readAll(t, res)), &chunks); err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("GET: %d, %v", res.StatusCode, err)
	}
	content := func(c chunkEvent) string {
		if p := c.Choices[0].Delta.Content; p != nil {
			return *p
		}
		return ""
	}
	if len(chunks) != 3 || content(chunks[0]) != "Hello" || content(chunks[1]) != " there" ||
		chunks[2].Choices[0].FinishReason == nil || *chunks[2].Choices[0].FinishReason != "stop" {
		t.Fatalf("GET read %+v", chunks)
	}
	if res.Header.Get("Stream-Closed") != "true" || res.Header.Get("Content-Type") != "application/json" || res.Header.Get("Stream-Expires-At") == "" {
		t.Fatalf("GET headers %v", res.Header)
	}
	for _, method := range []string{http.MethodPost, http.MethodPut, http.MethodDelete} {
		if res := do(t, method, u, "x", dsHeader(nil, "application/json")); res.StatusCode != http.StatusMethodNotAllowed {
			t.Fatalf("%s: %d, want 405", method, res.StatusCode)
		}
	}
	if res := do(t, http.MethodGet, edge.url+"/ds/generations/"+wire.NewStreamID(), "", nil); res.StatusCode != http.StatusNotFound {
		t.Fatalf("an unknown generation: %d, want 404", res.StatusCode)
	}
	created := do(t, http.MethodPut, edge.url+"/ds/not-a-generation", "data", dsHeader(nil, "text/plain"))
	ds := created.Header.Get("X-Relay-Stream-Id")
	if created.StatusCode != http.StatusCreated || !wire.ValidStreamID(ds) {
		t.Fatalf("PUT a Durable Stream: %d, id %q", created.StatusCode, ds)
	}
	if res := do(t, http.MethodGet, edge.url+"/ds/generations/"+ds, "", nil); res.StatusCode != http.StatusNotFound {
		t.Fatalf("a Durable Stream read as a generation: %d, want 404", res.StatusCode)
	}

	first := do(t, http.MethodGet, u+"?offset=-1&live=long-poll", "", nil)
	readAll(t, first)
	tail := first.Header.Get("Stream-Next-Offset")
	res = do(t, http.MethodGet, u+"?offset="+url.QueryEscape(tail), "", nil)
	if got := readAll(t, res); got != "[]" || res.Header.Get("Stream-Closed") != "true" {
		t.Fatalf("GET from the tail: %q, closed %q", got, res.Header.Get("Stream-Closed"))
	}
}

// In the ui dialect a generation reads as the UI message chunks of
// POST /v1/chats; a read from an offset goes on as the read from the
// start does, part ids included, with no chunk of the frames before it.
func TestDurableStreamsServeGenerationsAsUIMessages(t *testing.T) {
	e := newEnv(t)
	e.fixCursorKey()
	edge := e.startEdge(Config{})
	id := wire.NewStreamID()
	cursors := e.writeStream(id, wire.Meta{Model: testModel, Created: time.Now().Unix()}, []wire.Frame{
		{Kind: wire.KindChunk, Seq: 1, Role: "assistant", Content: "Hello"},
		{Kind: wire.KindChunk, Seq: 2, Content: " there"},
		{Kind: wire.KindEnd, Seq: 3, Status: wire.StatusDone, FinishReason: "stop"},
	})
	u := edge.url + "/ds/generations/" + id + "?dialect=ui"
	read := func(offset string) []map[string]any {
		t.Helper()
		res := do(t, http.MethodGet, u+"&offset="+url.QueryEscape(offset), "", nil)
		var chunks []map[string]any
		if err := json.Unmarshal([]byte(readAll(t, res)), &chunks); err != nil || res.StatusCode != http.StatusOK {
			t.Fatalf("GET from %s: %d, %v", offset, res.StatusCode, err)
		}
		return chunks
	}
	shape := func(chunks []map[string]any) string {
		var b strings.Builder
		for _, c := range chunks {
			fmt.Fprintf(&b, "%v", c["type"])
			for _, k := range []string{"id", "delta", "finishReason"} {
				if v, ok := c[k]; ok {
					fmt.Fprintf(&b, " %s=%v", k, v)
				}
			}
			b.WriteString("; ")
		}
		return b.String()
	}
	whole := shape(read("-1"))
	if want := "start; start-step; text-start id=text-1; text-delta id=text-1 delta=Hello; text-delta id=text-1 delta= there; text-end id=text-1; finish-step; finish finishReason=stop; "; whole != want {
		t.Fatalf("from the start:\n %s\nwant\n %s", whole, want)
	}
	after := fixedCursorKey.Offset(wire.Offset{Seq: cursors[0].Seq, JSSeq: cursors[0].JSSeq})
	if got, want := shape(read(after)), "text-delta id=text-1 delta= there; text-end id=text-1; finish-step; finish finishReason=stop; "; got != want {
		t.Fatalf("after the first frame:\n %s\nwant\n %s", got, want)
	}

	// A snapshot folds the deltas stored so far, then the end follows.
	u += "&snapshot=true"
	if got, want := shape(read("-1")), "start; start-step; text-start id=text-1; text-delta id=text-1 delta=Hello there; text-end id=text-1; finish-step; finish finishReason=stop; "; got != want {
		t.Fatalf("snapshot:\n %s\nwant\n %s", got, want)
	}
	if res := do(t, http.MethodGet, edge.url+"/ds/generations/"+id+"?snapshot=maybe&offset=-1", "", nil); res.StatusCode != http.StatusBadRequest {
		t.Fatalf("snapshot=maybe: %d, want 400", res.StatusCode)
	}
}

// A generation's snapshot in the chat dialect is the one chunk of
// GET /v1/streams/{id}?snapshot=true, at the offset of the last frame it
// folds, then the final chunk.
func TestDurableStreamsServeGenerationSnapshots(t *testing.T) {
	e := newEnv(t)
	e.fixCursorKey()
	edge := e.startEdge(Config{})
	id := wire.NewStreamID()
	cursors := e.writeStream(id, wire.Meta{Model: testModel, Created: time.Now().Unix()}, []wire.Frame{
		{Kind: wire.KindChunk, Seq: 1, Role: "assistant", Content: "Hello"},
		{Kind: wire.KindChunk, Seq: 2, Content: " there"},
		{Kind: wire.KindChunk, Seq: 3, Content: "!"},
	})
	u := edge.url + "/ds/generations/" + id + "?snapshot=true&offset="
	from := fixedCursorKey.Offset(wire.Offset{Seq: cursors[0].Seq, JSSeq: cursors[0].JSSeq})
	res := do(t, http.MethodGet, u+url.QueryEscape(from), "", nil)
	var chunks []chunkEvent
	if err := json.Unmarshal([]byte(readAll(t, res)), &chunks); err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("GET: %d, %v", res.StatusCode, err)
	}
	tail := fixedCursorKey.Offset(wire.Offset{Seq: cursors[2].Seq, JSSeq: cursors[2].JSSeq})
	if len(chunks) != 1 || chunks[0].Choices[0].Delta.Content == nil || *chunks[0].Choices[0].Delta.Content != " there!" ||
		res.Header.Get("Stream-Next-Offset") != tail || res.Header.Get("Stream-Up-To-Date") != "true" {
		t.Fatalf("snapshot after the first frame: %+v, next %s (want %s)", chunks, res.Header.Get("Stream-Next-Offset"), tail)
	}
}
