package edge

import (
	"bufio"
	"flag"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/relaydev/relay/relay/wire"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Fatalf("%s differs (-update rewrites it)\ngot:\n%s\nwant:\n%s", path, got, want)
	}
}

// fixedID is a valid stream id, so that wire output is reproducible: a
// fresh server numbers its frames from 1.
const fixedID = "sabcdefghijklmnopqrstuvwxyz"

// goldenFrames are a claim, two chunks (the second after a fallback, with a
// tool call) and a done end.
func goldenFrames() []wire.Frame {
	return []wire.Frame{
		{Kind: wire.KindChunk, Role: "assistant", Content: "Hel", Provider: "alpha", Model: testModel, Attempt: 1},
		{Kind: wire.KindChunk, Content: "lo", Provider: "beta", Model: otherModel, Attempt: 2, Seam: wire.SeamFallback,
			ToolCalls: []byte(`[{"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":"{}"}}]`)},
		{Kind: wire.KindEnd, Status: wire.StatusDone, FinishReason: "tool_calls", Attempts: 2, Cost: 0.5,
			Usage: &wire.Usage{PromptTokens: 4, CompletionTokens: 2, TotalTokens: 6}},
	}
}

func TestReplayWireFormat(t *testing.T) {
	e := newEnv(t)
	e.fixCursorKey()
	edge := e.startEdge(Config{RetryHint: 1500 * time.Millisecond})
	e.writeStream(fixedID, wire.Meta{Model: testModel, Created: 1700000000}, goldenFrames())

	res := do(t, "GET", edge.url+"/v1/streams/"+fixedID, "", nil)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", res.StatusCode, readAll(t, res))
	}
	for header, want := range map[string]string{
		"Content-Type":      "text/event-stream",
		"Cache-Control":     "no-cache, no-transform",
		"X-Accel-Buffering": "no",
	} {
		if got := res.Header.Get(header); got != want {
			t.Errorf("%s = %q, want %q", header, got, want)
		}
	}
	// The stream took the connection over (serve_sse_conn.go): the body is
	// chunked, and the connection is kept for the next request
	// (serve_keepalive.go).
	if res.Close || len(res.TransferEncoding) != 1 || res.TransferEncoding[0] != "chunked" {
		t.Errorf("Connection: close %v, Transfer-Encoding %q", res.Close, res.TransferEncoding)
	}
	golden(t, "replay_done.sse", readAll(t, res))
}

func TestFailedStreamWireFormat(t *testing.T) {
	e := newEnv(t)
	e.fixCursorKey()
	edge := e.startEdge(Config{})
	e.writeStream(fixedID, wire.Meta{Model: testModel, Created: 1700000000}, failing(wire.StatusIncomplete, &wire.Error{
		Message: "provider alpha stalled", Type: wire.TypeIncomplete, Code: "upstream_stalled", Status: 504,
	})(wire.Request{}))
	golden(t, "replay_incomplete.sse", readAll(t, do(t, "GET", edge.url+"/v1/streams/"+fixedID, "", nil)))
}

// TestCancelledStreamWireFormat pins the end of a cancelled stream: an
// error event with the usage of what was generated.
func TestCancelledStreamWireFormat(t *testing.T) {
	e := newEnv(t)
	e.fixCursorKey()
	edge := e.startEdge(Config{})
	e.writeStream(fixedID, wire.Meta{Model: testModel, Created: 1700000000, Cancelled: true}, []wire.Frame{
		{Kind: wire.KindChunk, Role: "assistant", Content: "Hel", Provider: "alpha", Model: testModel, Attempt: 1},
		cancelledEnd(1),
	})
	golden(t, "replay_cancelled.sse", readAll(t, do(t, "GET", edge.url+"/v1/streams/"+fixedID, "", nil)))
}

func TestPostStreams(t *testing.T) {
	e := newEnv(t)
	w := e.startWorker(&worker{script: answer(20), pace: time.Millisecond})
	edge := e.startEdge(Config{})

	res := do(t, "POST", edge.url+"/v1/chat/completions", chatBody(true, "hi"), nil)
	if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d, %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	id := res.Header.Get("X-Relay-Stream-Id")
	if !wire.ValidStreamID(id) {
		t.Fatalf("X-Relay-Stream-Id = %q", id)
	}
	body := readAll(t, res)
	if !strings.HasPrefix(body, "retry: 1000\n\n") || !strings.HasSuffix(body, "\n\ndata: [DONE]\n\n") {
		t.Fatalf("body:\n%s", body)
	}
	if got := checkAnswer(t, body, 20); got != words(20) {
		t.Fatalf("text %q", got)
	}
	first := decodeChunk(t, frameEvents(parseSSE(t, body))[0].Data)
	if first.ID != "chatcmpl-"+id || first.Object != "chat.completion.chunk" || first.Model != testModel ||
		first.Created == 0 || first.Choices[0].Delta.Role != "assistant" || first.Relay.StreamID != id || first.Relay.Provider != "alpha" {
		t.Fatalf("first chunk %+v", first)
	}

	// The worker got the client's request as sent.
	req := <-w.reqs
	if req.StreamID != id || req.Model != testModel || string(req.Body) != chatBody(true, "hi") || req.Created != first.Created {
		t.Fatalf("request %+v", req)
	}
}

func TestKeepaliveWhileQueued(t *testing.T) {
	e := newEnv(t)
	w := e.startWorker(&worker{script: answer(2), gate: make(chan struct{})})
	edge := e.startEdge(Config{Keepalive: 20 * time.Millisecond})

	res := do(t, "POST", edge.url+"/v1/chat/completions", chatBody(true, "hi"), nil)
	r := bufio.NewReader(res.Body)
	readEvents(t, r, func(ev sseEvent) bool { return ev.Comment == "keepalive" })
	close(w.gate)
	events := readEvents(t, r, func(ev sseEvent) bool { return ev.Data == "[DONE]" })
	if n := len(frameEvents(events)); n != 3 {
		t.Fatalf("%d frame events after keepalive: %+v", n, events)
	}
	if edge.hub.Stats().Idle == 0 {
		t.Fatal("an idle follower never re-read the log")
	}
}

func TestErrorTerminalsEndWithAnErrorEvent(t *testing.T) {
	for _, tc := range []struct {
		status   wire.Status
		err      *wire.Error
		wantType string
		wantCode string
	}{
		{wire.StatusFailed, &wire.Error{Message: "all providers failed", Type: wire.TypeUpstream, Code: "providers_exhausted", Status: 503}, wire.TypeUpstream, "providers_exhausted"},
		{wire.StatusIncomplete, nil, wire.TypeIncomplete, "incomplete"},
	} {
		t.Run(string(tc.status), func(t *testing.T) {
			e := newEnv(t)
			e.startWorker(&worker{script: failing(tc.status, tc.err)})
			edge := e.startEdge(Config{})
			events := parseSSE(t, readAll(t, do(t, "POST", edge.url+"/v1/chat/completions", chatBody(true, "hi"), nil)))
			frames := frameEvents(events)
			if len(frames) != 2 || events[len(events)-1].Data != "[DONE]" {
				t.Fatalf("events %+v", events)
			}
			end := decodeChunk(t, frames[1].Data)
			if end.Error == nil || end.Error.Type != tc.wantType || end.Error.Code != tc.wantCode || end.Relay.Status != tc.status || end.Relay.Attempts != 2 {
				t.Fatalf("end event %s", frames[1].Data)
			}
			// What the generation consumed is reported whatever the status.
			if end.Usage == nil || end.Usage.TotalTokens != 7 {
				t.Fatalf("end event without usage: %s", frames[1].Data)
			}
			if strings.Contains(frames[1].Data, "http_status") || strings.Contains(frames[1].Data, "finish_reason") {
				t.Fatalf("end event leaks fields: %s", frames[1].Data)
			}
		})
	}
}
