package edge

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/relaydev/relay/relay/dialect/chat"
	"github.com/relaydev/relay/relay/wire"
)

// wsMsg is a server message as a client decodes it.
type wsMsg struct {
	Type         string          `json:"type"`
	StreamID     string          `json:"stream_id"`
	Cursor       string          `json:"cursor"`
	Chunk        json.RawMessage `json:"chunk"`
	Status       wire.Status     `json:"status"`
	FinishReason string          `json:"finish_reason"`
	Usage        *wire.Usage     `json:"usage"`
	Error        *chat.Error     `json:"error"`
	Attempts     int             `json:"attempts"`
	RetryMS      int64           `json:"retry_ms"`
}

func dialWS(t *testing.T, edge *testEdge) *websocket.Conn {
	t.Helper()
	conn, res, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(edge.url, "http")+"/v1/ws", nil)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	res.Body.Close()
	t.Cleanup(func() { conn.Close() })
	conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	return conn
}

func sendWS(t *testing.T, conn *websocket.Conn, msg string) {
	t.Helper()
	if err := conn.WriteMessage(websocket.TextMessage, []byte(msg)); err != nil {
		t.Fatal(err)
	}
}

func readWS(t *testing.T, conn *websocket.Conn) wsMsg {
	t.Helper()
	var m wsMsg
	if err := conn.ReadJSON(&m); err != nil {
		t.Fatalf("read: %v", err)
	}
	return m
}

// readStream reads the messages of one stream until its end.
func readStream(t *testing.T, conn *websocket.Conn) []wsMsg {
	t.Helper()
	var out []wsMsg
	for {
		m := readWS(t, conn)
		out = append(out, m)
		if m.Type == "end" || m.Type == "error" {
			return out
		}
	}
}

func TestWebSocketStartAndResume(t *testing.T) {
	e := newEnv(t)
	e.startWorker(&worker{script: answer(8), pace: time.Millisecond})
	edge := e.startEdge(Config{})
	conn := dialWS(t, edge)

	sendWS(t, conn, `{"type":"start","request":`+chatBody(true, "hi")+`}`)
	started := readWS(t, conn)
	if started.Type != "started" || !wire.ValidStreamID(started.StreamID) {
		t.Fatalf("first message %+v", started)
	}
	id := started.StreamID
	msgs := readStream(t, conn)
	if len(msgs) != 9 {
		t.Fatalf("%d messages: %+v", len(msgs), msgs)
	}
	end := msgs[8]
	if end.Type != "end" || end.Status != wire.StatusDone || end.FinishReason != "stop" || end.Usage.TotalTokens != 11 || end.Attempts != 1 || end.Error != nil {
		t.Fatalf("end %+v", end)
	}

	// Chunks are the very objects an SSE client gets for the same frames.
	sse := frameEvents(parseSSE(t, readAll(t, do(t, "GET", edge.url+"/v1/streams/"+id, "", nil))))
	for i, m := range msgs[:8] {
		if m.Type != "chunk" || m.StreamID != id || m.Cursor != sse[i].ID || string(m.Chunk) != sse[i].Data {
			t.Fatalf("message %d %+v\nSSE %+v", i, m, sse[i])
		}
	}

	// Another connection resumes after the third chunk, and after the end.
	conn2 := dialWS(t, edge)
	sendWS(t, conn2, `{"type":"resume","stream_id":"`+id+`","after":"`+msgs[2].Cursor+`"}`)
	rest := readStream(t, conn2)
	if len(rest) != 6 || rest[0].Cursor != msgs[3].Cursor || rest[5].Cursor != end.Cursor {
		t.Fatalf("resumed %+v", rest)
	}
	sendWS(t, conn2, `{"type":"resume","stream_id":"`+id+`","after":"`+end.Cursor+`"}`)
	if again := readWS(t, conn2); again.Type != "end" || again.Cursor != end.Cursor || again.Status != wire.StatusDone {
		t.Fatalf("resume at the end: %+v", again)
	}
}

func TestWebSocketRequestErrors(t *testing.T) {
	e := newEnv(t)
	edge := e.startEdge(Config{})
	conn := dialWS(t, edge)
	unknown := wire.NewStreamID()
	for _, tc := range []struct {
		send, streamID, code string
	}{
		// Messages that are not JSON or have an unknown type close the
		// connection: TestWebSocketProtocolViolations.
		{`{"type":"start"}`, "", CodeInvalidJSON},
		{`{"type":"start","request":{"model":"gpt-nope","messages":[{"role":"user"}]}}`, "", CodeModelNotFound},
		{`{"type":"resume","stream_id":"` + unknown + `"}`, unknown, CodeStreamNotFound},
		{`{"type":"resume","stream_id":"x"}`, "x", CodeInvalidStreamID},
	} {
		sendWS(t, conn, tc.send)
		m := readWS(t, conn)
		if m.Type != "error" || m.StreamID != tc.streamID || m.Error == nil || m.Error.Code != tc.code {
			t.Errorf("%s: got %+v (error %+v)", tc.send, m, m.Error)
		}
	}
}

func TestWebSocketStreamsInterleave(t *testing.T) {
	e := newEnv(t)
	w := e.startWorker(&worker{script: answer(10), gate: make(chan struct{})})
	edge := e.startEdge(Config{})
	conn := dialWS(t, edge)
	sendWS(t, conn, `{"type":"start","request":`+chatBody(true, "a")+`}`)
	sendWS(t, conn, `{"type":"start","request":`+chatBody(true, "b")+`}`)
	a, b := readWS(t, conn), readWS(t, conn)
	if a.Type != "started" || b.Type != "started" || a.StreamID == b.StreamID {
		t.Fatalf("started %+v %+v", a, b)
	}
	// A stream cannot be followed twice on one connection.
	sendWS(t, conn, `{"type":"resume","stream_id":"`+a.StreamID+`"}`)
	if m := readWS(t, conn); m.Type != "error" || m.Error.Code != CodeStreamActive {
		t.Fatalf("second follow: %+v", m)
	}
	close(w.gate)
	seqs := map[string]int{}
	for ended := 0; ended < 2; {
		m := readWS(t, conn)
		c, err := e.openCursor(m.Cursor)
		if err != nil || int(c.Seq) != seqs[m.StreamID]+1 {
			t.Fatalf("stream %s: %+v after seq %d", m.StreamID, m, seqs[m.StreamID])
		}
		seqs[m.StreamID]++
		if m.Type == "end" {
			ended++
		}
	}
	if seqs[a.StreamID] != 11 || seqs[b.StreamID] != 11 {
		t.Fatalf("seqs %v", seqs)
	}
}

func TestWebSocketPingsAndReadLimit(t *testing.T) {
	e := newEnv(t)
	// A keepalive long enough that a loaded machine's late pong is not
	// taken for a dead client (the read deadline is two keepalives).
	edge := e.startEdge(Config{Keepalive: 200 * time.Millisecond, MaxBodyBytes: 1024})
	conn := dialWS(t, edge)
	var pings atomic.Int32
	conn.SetPingHandler(func(data string) error {
		pings.Add(1)
		return conn.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(time.Second))
	})
	// Reading is what runs the ping handler; the too-large message below
	// ends the read with the server's close.
	done := make(chan error, 1)
	go func() {
		for {
			if _, _, err := conn.ReadMessage(); err != nil {
				done <- err
				return
			}
		}
	}()
	// The server outlives its read deadline (2 x Keepalive) as long as the
	// client answers pings.
	waitFor(t, func() bool { return pings.Load() >= 4 })
	sendWS(t, conn, `{"type":"start","request":{"pad":"`+strings.Repeat("x", 1024+wsEnvelope)+`"}}`)
	err := <-done
	if ce, ok := errors.AsType[*websocket.CloseError](err); !ok || ce.Code != websocket.CloseMessageTooBig {
		t.Fatalf("after a too-large message: %v", err)
	}
}

func TestWebSocketUpgradeRequired(t *testing.T) {
	e := newEnv(t)
	edge := e.startEdge(Config{})
	res := do(t, "GET", edge.url+"/v1/ws", "", nil)
	if got := decodeError(t, res); res.StatusCode != http.StatusBadRequest || got.Type != wire.TypeInvalidRequest {
		t.Fatalf("plain GET /v1/ws: %d %+v", res.StatusCode, got)
	}
}
