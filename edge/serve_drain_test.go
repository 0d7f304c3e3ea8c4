package edge

import (
	"bufio"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/relaydev/relay/relay/dialect/chat"
	"github.com/relaydev/relay/relay/wire"
)

// checkDrainEvent checks the last event of an SSE response ended by a
// draining edge: the retry hint and the draining error, without an id (so
// the client's last event id stays the last frame it got) and without
// [DONE].
func checkDrainEvent(t *testing.T, rest, retry string) {
	t.Helper()
	var ev struct {
		Error chat.Error `json:"error"`
	}
	events := parseSSE(t, rest)
	if len(events) != 1 || events[0].ID != "" || events[0].Retry != retry || decodeInto(events[0].Data, &ev) != nil ||
		ev.Error.Code != CodeDraining || ev.Error.Type != wire.TypeServer {
		t.Fatalf("the response ended with %q", rest)
	}
}

func TestDrainSSEClientResumesOnAnotherEdge(t *testing.T) {
	e := newEnv(t)
	w := e.startWorker(&worker{script: answer(10), gate: make(chan struct{})})
	a := e.startEdge(Config{RetryHint: 1500 * time.Millisecond})
	b := e.startEdge(Config{})

	res := do(t, "POST", a.url+"/v1/chat/completions", chatBody(true, "hi"), nil)
	id := res.Header.Get("X-Relay-Stream-Id")
	for range 3 {
		w.gate <- struct{}{}
	}
	r := bufio.NewReader(res.Body)
	got := readEvents(t, r, seqIs(t, 3))

	if err := a.shutdown(); err != nil {
		t.Fatalf("Serve: %v", err)
	}
	checkDrainEvent(t, readAll(t, &http.Response{Body: readCloser{r}}), "1500")
	if _, err := (&http.Client{Transport: &http.Transport{}}).Get(a.url + "/healthz"); err == nil {
		t.Fatal("the drained edge still accepts connections")
	}
	if n := a.clients.count(clientSSE); n != 0 {
		t.Fatalf("%d SSE clients left", n)
	}

	// As an EventSource does: reconnect with the last event id, here to
	// the other edge; the rest of the stream follows exactly.
	resumed := do(t, "GET", b.url+"/v1/streams/"+id, "", http.Header{"Last-Event-Id": {got[len(got)-1].ID}})
	close(w.gate)
	if text := checkAnswer(t, strings.Join(sseText(got), "")+readAll(t, resumed), 10); text != words(10) {
		t.Fatalf("text across the drain %q", text)
	}
	// The drain did not count as the client leaving.
	if n := a.orphans.stats.left.Load(); n != 0 {
		t.Fatalf("%d clients counted as gone", n)
	}
}

func TestDrainWebSocketClientResumesOnAnotherEdge(t *testing.T) {
	e := newEnv(t)
	w := e.startWorker(&worker{script: answer(10), gate: make(chan struct{})})
	a := e.startEdge(Config{RetryHint: 250 * time.Millisecond})
	b := e.startEdge(Config{})

	conn := dialWS(t, a)
	sendWS(t, conn, `{"type":"start","request":`+chatBody(true, "hi")+`}`)
	id := readWS(t, conn).StreamID
	for range 3 {
		w.gate <- struct{}{}
	}
	var got []wsMsg
	for len(got) < 3 {
		got = append(got, readWS(t, conn))
	}

	if err := a.shutdown(); err != nil {
		t.Fatalf("Serve: %v", err)
	}
	if m := readWS(t, conn); m.Type != "reconnect" || m.RetryMS != 250 || m.Error == nil || m.Error.Code != CodeDraining {
		t.Fatalf("last message %+v", m)
	}
	_, _, err := conn.ReadMessage()
	if ce, ok := errors.AsType[*websocket.CloseError](err); !ok || ce.Code != websocket.CloseGoingAway {
		t.Fatalf("after the reconnect message: %v", err)
	}

	conn2 := dialWS(t, b)
	sendWS(t, conn2, `{"type":"resume","stream_id":"`+id+`","after":"`+got[2].Cursor+`"}`)
	close(w.gate)
	all := append(got, readStream(t, conn2)...)
	var text strings.Builder
	for i, m := range all {
		c, err := e.openCursor(m.Cursor)
		if err != nil || c.Seq != uint64(i+1) || m.StreamID != id {
			t.Fatalf("message %d: %+v", i, m)
		}
		if m.Type == "chunk" {
			text.WriteString(*decodeChunk(t, string(m.Chunk)).Choices[0].Delta.Content)
		}
	}
	if len(all) != 11 || all[10].Type != "end" || all[10].Status != wire.StatusDone || text.String() != words(10) {
		t.Fatalf("across the drain: %d messages, text %q", len(all), text.String())
	}
}

// TestDrainAnswersWaitingCompletion: a "stream": false client gets a
// retryable error that names its stream, which runs on.
func TestDrainAnswersWaitingCompletion(t *testing.T) {
	e := newEnv(t)
	w := e.startWorker(&worker{script: answer(3), gate: make(chan struct{})})
	a := e.startEdge(Config{RetryHint: 2500 * time.Millisecond})
	b := e.startEdge(Config{})

	answered := make(chan *http.Response, 1)
	go func() {
		res, err := http.Post(a.url+"/v1/chat/completions", "application/json", strings.NewReader(chatBody(false, "hi")))
		if err != nil {
			t.Error(err)
		}
		answered <- res
	}()
	waitFor(t, func() bool { return a.clients.count(clientUnary) == 1 })
	if err := a.shutdown(); err != nil {
		t.Fatalf("Serve: %v", err)
	}
	res := <-answered
	if res == nil {
		return
	}
	defer res.Body.Close()
	id := res.Header.Get("X-Relay-Stream-Id")
	got := decodeError(t, res)
	if res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") != "3" || got.Code != CodeDraining ||
		!wire.ValidStreamID(id) || !strings.Contains(got.Message, "/v1/streams/"+id) {
		t.Fatalf("%d (Retry-After %q): %+v", res.StatusCode, res.Header.Get("Retry-After"), got)
	}
	close(w.gate)
	if text := checkAnswer(t, readAll(t, do(t, "GET", b.url+"/v1/streams/"+id, "", nil)), 3); text != words(3) {
		t.Fatalf("text %q", text)
	}
}

// TestDrainingEdgeRefusesNewWork covers requests that reach an edge after
// it started draining, on connections it had accepted before.
func TestDrainingEdgeRefusesNewWork(t *testing.T) {
	e := newEnv(t)
	edge := e.startEdge(Config{})
	id := wire.NewStreamID()
	e.writeStream(id, wire.Meta{Model: testModel}, nil) // running, no chunk yet
	edge.clients.close()                                // what Serve does once the listener is closed

	res := do(t, "POST", edge.url+"/v1/chat/completions", chatBody(true, "hi"), nil)
	if got := decodeError(t, res); res.StatusCode != 503 || got.Code != CodeDraining || res.Header.Get("Retry-After") != "1" ||
		res.Header.Get("X-Relay-Stream-Id") != "" {
		t.Fatalf("POST: %d %+v", res.StatusCode, got)
	}
	if _, res, err := websocket.DefaultDialer.Dial(wsURL(edge), nil); err == nil || res == nil || res.StatusCode != 503 {
		t.Fatalf("upgrade: %v", err)
	} else {
		res.Body.Close()
	}
	// An EventSource gives up on an error status, so a resume is told to
	// reconnect instead.
	res = do(t, "GET", edge.url+"/v1/streams/"+id, "", nil)
	body := readAll(t, res)
	rest, ok := strings.CutPrefix(body, "retry: 1000\n\n")
	if res.StatusCode != 200 || !ok {
		t.Fatalf("GET: %d %q", res.StatusCode, body)
	}
	checkDrainEvent(t, rest, "1000")
	if res := do(t, "GET", edge.url+"/readyz", "", nil); res.StatusCode != 503 {
		t.Fatalf("readyz while draining: %d", res.StatusCode)
	}
}
