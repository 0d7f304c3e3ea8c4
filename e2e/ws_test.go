package e2e

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/relaydev/relay/relay/mockupstream"
)

// wsMessage is a server message of the WebSocket protocol.
type wsMessage struct {
	Type     string          `json:"type"`
	StreamID string          `json:"stream_id"`
	Cursor   string          `json:"cursor"`
	Chunk    json.RawMessage `json:"chunk"`
	Status   string          `json:"status"`
	Error    *struct {
		Message string `json:"message"`
	} `json:"error"`
}

func dialWS(t *testing.T, ctx context.Context, edge string) *websocket.Conn {
	t.Helper()
	conn, _, err := websocket.DefaultDialer.DialContext(ctx, "ws"+strings.TrimPrefix(edge, "http")+"/v1/ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	return conn
}

// Test 4: like test 2, over WebSocket: five drops, resumes alternate
// between two edges, the answer is exact and no cursor repeats or skips.
func TestWebSocketResumeAcrossEdgesAfterDrops(t *testing.T) {
	const tokens = 200
	sys := start(t, options{Edges: 2, Mock: mockupstream.Config{Tokens: tokens, TokenInterval: 2 * time.Millisecond}})
	msgs, want := prompt("A long answer over WebSocket.", tokens)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	drops := dropPoints(rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 4)), 5, 20)
	t.Logf("dropping after events %v", drops)

	conn := dialWS(t, ctx, sys.Edges[0])
	var req map[string]any
	must(t, json.Unmarshal(chatBody(t, msgs, true), &req))
	must(t, conn.WriteJSON(map[string]any{"type": "start", "request": req}))

	tr := &transcript{}
	var streamID string
	for i := 0; !tr.done; {
		var m wsMessage
		if err := conn.ReadJSON(&m); err != nil {
			t.Fatalf("read after %d events: %v", tr.events, err)
		}
		switch m.Type {
		case "started":
			streamID = m.StreamID
			continue
		case "chunk":
			must(t, tr.add(sseEvent{ID: m.Cursor, Data: string(m.Chunk)}))
		case "end":
			if m.Status != "done" || m.StreamID != streamID {
				t.Fatalf("end message %+v", m)
			}
			tr.done = true
			continue
		default:
			t.Fatalf("unexpected message %+v", m)
		}
		if m.StreamID != streamID {
			t.Fatalf("message for stream %q, want %q", m.StreamID, streamID)
		}
		if len(drops) > 0 && tr.events == drops[0] {
			drops = drops[1:]
			conn.Close()
			i++
			conn = dialWS(t, ctx, sys.Edges[i%2])
			must(t, conn.WriteJSON(map[string]any{"type": "resume", "stream_id": streamID, "after": tr.lastID}))
		}
	}
	conn.Close()
	if got := tr.text.String(); got != want {
		t.Fatalf("text differs:\n got %q\nwant %q", got, want)
	}
}
