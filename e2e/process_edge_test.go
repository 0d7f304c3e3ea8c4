package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/relaydev/relay/relay/mockupstream"
)

// pwsMessage is a server message of the WebSocket protocol, with the
// fields the process tests look at.
type pwsMessage struct {
	Type     string          `json:"type"`
	StreamID string          `json:"stream_id"`
	Cursor   string          `json:"cursor"`
	Chunk    json.RawMessage `json:"chunk"`
	Status   string          `json:"status"`
	RetryMS  int64           `json:"retry_ms"`
	Error    *struct {
		Message string `json:"message"`
		Code    string `json:"code"`
	} `json:"error"`
}

// wsFollower follows one stream over WebSocket connections.
type wsFollower struct {
	conn *websocket.Conn
	id   string
	tr   transcript
	at   []time.Time
	// end is the status of the end message, once it came.
	end string
}

// wsStart opens a connection to edge and starts a generation on it.
func wsStart(t *testing.T, ctx context.Context, edge string, msgs []mockupstream.Message) *wsFollower {
	t.Helper()
	f := &wsFollower{conn: dialWS(t, ctx, edge)}
	var req map[string]any
	must(t, json.Unmarshal(chatBody(t, msgs, true), &req))
	must(t, f.conn.WriteJSON(map[string]any{"type": "start", "request": req}))
	return f
}

// next reads one message; chunks and the end go into the transcript,
// anything else is returned for the caller to judge.
func (f *wsFollower) next() (pwsMessage, error) {
	var m pwsMessage
	if err := f.conn.ReadJSON(&m); err != nil {
		return m, err
	}
	switch m.Type {
	case "started":
		f.id = m.StreamID
	case "chunk":
		if err := f.tr.add(sseEvent{ID: m.Cursor, Data: string(m.Chunk)}); err != nil {
			return m, err
		}
		f.at = append(f.at, time.Now())
	case "end":
		f.end = m.Status
		f.at = append(f.at, time.Now())
	}
	if m.StreamID != "" && f.id != "" && m.StreamID != f.id {
		return m, fmt.Errorf("message for stream %q on a connection following %q", m.StreamID, f.id)
	}
	return m, nil
}

// readChunks reads until the transcript holds n chunks.
func (f *wsFollower) readChunks(n int) error {
	for f.tr.events < n && f.end == "" {
		m, err := f.next()
		if err != nil {
			return err
		}
		if m.Type != "started" && m.Type != "chunk" && m.Type != "end" {
			return fmt.Errorf("unexpected message %+v", m)
		}
	}
	return nil
}

// SIGTERM drains an edge. Its SSE client gets a last event with a retry
// hint and code edge_draining, without id and without [DONE]; its WebSocket
// client gets a reconnect message and close
// 1001. Both resume on the other edge and receive exactly the rest. The
// edge tells them at once (no timeout) and exits.
func TestProcessEdgeDrain(t *testing.T) {
	const tokens = 80
	s := start(t, options{Processes: true, Mock: mockupstream.Config{Tokens: tokens, TokenInterval: 40 * time.Millisecond}, Edges: 2, Workers: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	draining, other := s.edgeProcs[0], s.edgeProcs[1].URL

	sseMsgs, sseWant := prompt("Process test: an SSE client of a draining edge.", tokens)
	sse, err := postStream(ctx, draining.URL, sseMsgs, sseWant, nil)
	must(t, err)
	defer sse.close()
	wsMsgs, wsWant := prompt("Process test: a WebSocket client of a draining edge.", tokens)
	ws := wsStart(t, ctx, draining.URL, wsMsgs)
	defer func() { ws.conn.Close() }()
	must(t, sse.readN(8))
	must(t, ws.readChunks(8))

	termed := time.Now()
	must(t, draining.Term())

	// SSE: the drain event ends the response.
	var broken errBroken
	for {
		err := sse.next()
		if errors.As(err, &broken) {
			break
		}
		must(t, err)
	}
	sseTold := time.Since(termed)
	if broken.code != "edge_draining" || sse.last.Retry != "1000" || sse.tr.done {
		t.Fatalf("SSE response ended with code %q, retry %q, [DONE] %v; want edge_draining, retry 1000, no [DONE]",
			broken.code, sse.last.Retry, sse.tr.done)
	}
	if _, err := readPEvent(sse.cur.r); err == nil {
		t.Fatal("the SSE response went on after the drain event")
	}

	// WebSocket: reconnect, then close 1001.
	var reconnect pwsMessage
	for reconnect.Type == "" {
		m, err := ws.next()
		must(t, err)
		switch m.Type {
		case "chunk":
		case "reconnect":
			reconnect = m
		default:
			t.Fatalf("unexpected message %+v", m)
		}
	}
	wsTold := time.Since(termed)
	if reconnect.RetryMS != 1000 || reconnect.Error == nil || reconnect.Error.Code != "edge_draining" {
		t.Fatalf("reconnect message %+v; want retry_ms 1000 and code edge_draining", reconnect)
	}
	_, _, err = ws.conn.ReadMessage()
	if !websocket.IsCloseError(err, websocket.CloseGoingAway) {
		t.Fatalf("after reconnect: %v; want close 1001", err)
	}
	ws.conn.Close()

	exitCtx, exitCancel := context.WithTimeout(ctx, 10*time.Second)
	defer exitCancel()
	if err := draining.Wait(exitCtx); err != nil {
		t.Errorf("the drained edge: %v", err)
	}
	exited := time.Since(termed)

	// Both resume on the other edge after their last cursor.
	resumed := time.Now()
	must(t, sse.finish(ctx, func() string { return other }, nil))
	must(t, sse.check())
	if sse.resumes != 1 {
		t.Errorf("SSE client resumed %d times; want 1", sse.resumes)
	}
	sseNext, _ := sse.firstAfter(resumed)

	ws.conn = dialWS(t, ctx, other)
	must(t, ws.conn.WriteJSON(map[string]any{"type": "resume", "stream_id": ws.id, "after": ws.tr.lastID}))
	for ws.end == "" {
		m, err := ws.next()
		must(t, err)
		if m.Type != "chunk" && m.Type != "end" {
			t.Fatalf("unexpected message %+v", m)
		}
	}
	if got := ws.tr.text.String(); got != wsWant || ws.end != "done" {
		t.Fatalf("WebSocket stream ended %q; text differs:\n got %q\nwant %q", ws.end, got, wsWant)
	}
	t.Logf("edge drain: SSE told %v and WebSocket told %v after SIGTERM; edge exited after %v; "+
		"first event after the SSE resume on the other edge in %v",
		sseTold.Round(time.Millisecond), wsTold.Round(time.Millisecond), exited.Round(time.Millisecond),
		sseNext.Sub(resumed).Round(time.Millisecond))
	if sseTold > time.Second || wsTold > time.Second {
		t.Errorf("clients were told to reconnect %v (SSE) and %v (WebSocket) after SIGTERM; want at once", sseTold, wsTold)
	}
	if exited > 5*time.Second {
		t.Errorf("the edge took %v to exit after SIGTERM", exited)
	}
	if msgs := logged(draining, "stream interrupted", ""); len(msgs) > 0 {
		t.Errorf("the draining edge logged %d interrupted streams", len(msgs))
	}
}
