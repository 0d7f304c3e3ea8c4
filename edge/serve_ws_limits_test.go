package edge

import (
	"errors"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// Pings count against edge.ws_max_messages_per_second: a ping flood is
// closed like a message flood, and pings within the rate are answered.
func TestWebSocketPingFloodIsClosed(t *testing.T) {
	e := newEnv(t)
	edge := e.startEdge(Config{WSMaxMessagesPerSecond: 5})

	calm := dialWS(t, edge)
	pongs := make(chan string, 1)
	calm.SetPongHandler(func(data string) error { pongs <- data; return nil })
	if err := calm.WriteControl(websocket.PingMessage, []byte("one"), time.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	go calm.ReadMessage() // runs the pong handler
	select {
	case got := <-pongs:
		if got != "one" {
			t.Fatalf("pong %q", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no pong for a ping within the rate")
	}

	conn := dialWS(t, edge)
	for range 200 {
		if conn.WriteControl(websocket.PingMessage, nil, time.Now().Add(time.Second)) != nil {
			break // closed meanwhile
		}
	}
	var err error
	for err == nil {
		_, _, err = conn.ReadMessage()
	}
	if ce, ok := errors.AsType[*websocket.CloseError](err); !ok || ce.Code != websocket.ClosePolicyViolation || ce.Text == "" {
		t.Errorf("%v, want close %d with a reason", err, websocket.ClosePolicyViolation)
	}
	if got := edge.wsStats.closed[wsClosedFlood].Load(); got != 1 {
		t.Errorf("%d closed for flooding", got)
	}
}
