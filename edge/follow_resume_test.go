package edge

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/relaydev/relay/relay/relaytest"
	"github.com/relaydev/relay/relay/wire"
)

func TestResumeFinishedStream(t *testing.T) {
	e := newEnv(t)
	edge := e.startEdge(Config{})
	id := wire.NewStreamID()
	cursors := e.writeStream(id, wire.Meta{Model: testModel, Created: 1}, answer(10)(wire.Request{}))
	url := edge.url + "/v1/streams/" + id

	full := readAll(t, do(t, "GET", url, "", nil))
	if got := checkAnswer(t, full, 10); got != words(10) {
		t.Fatalf("replay text %q", got)
	}
	fullFrames := frameEvents(parseSSE(t, full))

	for name, res := range map[string]*http.Response{
		"header": do(t, "GET", url, "", http.Header{"Last-Event-Id": {e.seal(cursors[3])}}),
		"query":  do(t, "GET", url+"?last_event_id="+e.seal(cursors[3]), "", nil),
		// The header is what an EventSource sends on reconnect: it wins
		// over the query of its first URL.
		"header wins": do(t, "GET", url+"?last_event_id=garbage", "", http.Header{"Last-Event-Id": {e.seal(cursors[3])}}),
	} {
		t.Run(name, func(t *testing.T) {
			events := parseSSE(t, readAll(t, res))
			frames := frameEvents(events)
			if len(frames) != 7 || frames[0] != fullFrames[4] || events[len(events)-1].Data != "[DONE]" {
				t.Fatalf("resumed after 4 of 11 frames, got %d: %+v", len(frames), frames)
			}
			for i, ev := range frames {
				if ev != fullFrames[4+i] {
					t.Fatalf("frame %d differs from the full replay:\n%s\n%s", i, ev.Data, fullFrames[4+i].Data)
				}
			}
		})
	}

	t.Run("cursor at the end frame", func(t *testing.T) {
		end := cursors[len(cursors)-1]
		got := readAll(t, do(t, "GET", url, "", http.Header{"Last-Event-Id": {e.seal(end)}}))
		if got != "retry: 1000\n\ndata: [DONE]\n\n" {
			t.Fatalf("body %q", got)
		}
	})
}

func TestResumeLiveStream(t *testing.T) {
	e := newEnv(t)
	w := e.startWorker(&worker{script: answer(30), gate: make(chan struct{})})
	edge := e.startEdge(Config{})

	res := do(t, "POST", edge.url+"/v1/chat/completions", chatBody(true, "hi"), nil)
	id := res.Header.Get("X-Relay-Stream-Id")
	r := bufio.NewReader(res.Body)
	for range 10 {
		w.gate <- struct{}{}
	}
	got := readEvents(t, r, seqIs(t, 10))
	// The first connection breaks; the client resumes on the same edge
	// while the stream is still being generated.
	res.Body.Close()
	resumed := do(t, "GET", edge.url+"/v1/streams/"+id, "", http.Header{"Last-Event-Id": {got[len(got)-1].ID}})
	for range 21 {
		w.gate <- struct{}{}
	}
	rest := readAll(t, resumed)
	text := checkAnswer(t, strings.Join(sseText(got), "")+rest, 30)
	if text != words(30) {
		t.Fatalf("text across the resume %q", text)
	}
	// Both followers left the hub, and the stream's subscription with them.
	relaytest.Eventually(t, 5*time.Second, 5*time.Millisecond, func() bool {
		return edge.hub.Streams() == 0 && edge.clients.count(clientSSE) == 0
	})
}

// sseText renders parsed events back to the wire.
func sseText(events []sseEvent) []string {
	var out []string
	for _, ev := range events {
		var b strings.Builder
		if ev.Retry != "" {
			b.WriteString("retry: " + ev.Retry + "\n")
		}
		if ev.ID != "" {
			b.WriteString("id: " + ev.ID + "\n")
		}
		if ev.Data != "" {
			b.WriteString("data: " + ev.Data + "\n")
		}
		out = append(out, b.String()+"\n")
	}
	return out
}

func TestResumeErrors(t *testing.T) {
	e := newEnv(t)
	edge := e.startEdge(Config{})
	a, b := wire.NewStreamID(), wire.NewStreamID()
	ca := e.writeStream(a, wire.Meta{Model: testModel}, answer(3)(wire.Request{}))
	cb := e.writeStream(b, wire.Meta{Model: testModel}, answer(3)(wire.Request{}))
	// A cursor whose frame has been removed, as expiry does.
	stream, err := e.js.Stream(context.Background(), wire.ChunkStreamOf(a))
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.DeleteMsg(context.Background(), ca[1].JSSeq); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name, id, cursor string
		status           int
		want             string
	}{
		{"unknown stream", wire.NewStreamID(), "", 404,
			`{"error":{"message":"stream %ID% does not exist or has expired","type":"not_found_error","param":"id","code":"stream_not_found"}}`},
		{"malformed id", "s123", "", 400,
			`{"error":{"message":"\"s123\" is not a stream id","type":"invalid_request_error","param":"id","code":"invalid_stream_id"}}`},
		{"malformed cursor", a, "12", 400,
			`{"error":{"message":"malformed cursor \"12\": not a cursor of this relay","type":"invalid_request_error","param":"Last-Event-ID","code":"invalid_cursor"}}`},
		{"cursor of another stream", a, e.seal(cb[0]), 400,
			`{"error":{"message":"cursor %CURSOR% does not belong to stream %ID%","type":"invalid_request_error","param":"Last-Event-ID","code":"cursor_mismatch"}}`},
		{"cursor with another seq", a, e.seal(wire.Cursor{Seq: 2, JSSeq: ca[0].JSSeq}), 400, ""},
		{"cursor at a claim", a, e.seal(wire.Cursor{Seq: 1, JSSeq: ca[0].JSSeq - 1}), 400, ""},
		{"expired cursor", a, e.seal(ca[1]), 410,
			`{"error":{"message":"the frame at cursor %CURSOR% has expired; restart from the beginning","type":"invalid_request_error","param":"Last-Event-ID","code":"cursor_expired"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := do(t, "GET", edge.url+"/v1/streams/"+tc.id, "", http.Header{"Last-Event-Id": {tc.cursor}})
			body := readAll(t, res)
			if res.StatusCode != tc.status || res.Header.Get("Content-Type") != "application/json" {
				t.Fatalf("status %d %s: %s", res.StatusCode, res.Header.Get("Content-Type"), body)
			}
			want := strings.NewReplacer("%ID%", tc.id, "%CURSOR%", tc.cursor).Replace(tc.want)
			if tc.want == "" {
				want = strings.NewReplacer("%ID%", tc.id, "%CURSOR%", tc.cursor).Replace(
					`{"error":{"message":"cursor %CURSOR% does not belong to stream %ID%","type":"invalid_request_error","param":"Last-Event-ID","code":"cursor_mismatch"}}`)
			}
			if body != want+"\n" {
				t.Fatalf("body\n%s\nwant\n%s", body, want)
			}
			// What open subscribed (and read) before its checks is gone.
			if n := edge.hub.Streams(); n != 0 {
				t.Fatalf("%d streams still followed", n)
			}
		})
	}
}
