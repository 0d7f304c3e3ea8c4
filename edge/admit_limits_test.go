package edge

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// Every limit and type check answers 400 naming the parameter, and nothing
// refused reaches JetStream.
func TestInputLimits(t *testing.T) {
	e := newEnv(t)
	edge := e.startEdge(Config{MaxMessages: 3, MaxTokensCap: 1000, MaxBodyBytes: 4096})
	msg := `{"role":"user","content":"hi"}`
	body := func(extra string, msgs ...string) string {
		if len(msgs) == 0 {
			msgs = []string{msg}
		}
		return `{"model":"gpt-test","messages":[` + strings.Join(msgs, ",") + `]` + extra + `}`
	}
	for _, tc := range []struct {
		name, body  string
		status      int
		param, code string
	}{
		{"malformed JSON", `{"model":"gpt-test",`, 400, "", CodeInvalidJSON},
		{"too many messages", body("", msg, msg, msg, msg), 400, "messages", CodeLimitExceeded},
		{"max_tokens over the cap", body(`,"max_tokens":1001`), 400, "max_tokens", CodeLimitExceeded},
		{"max_completion_tokens over the cap", body(`,"max_completion_tokens":5000`), 400, "max_completion_tokens", CodeLimitExceeded},
		{"max_tokens not an integer", body(`,"max_tokens":"10"`), 400, "max_tokens", CodeInvalidValue},
		{"max_tokens fractional", body(`,"max_tokens":1.5`), 400, "max_tokens", CodeInvalidValue},
		{"max_tokens zero", body(`,"max_tokens":0`), 400, "max_tokens", CodeInvalidValue},
		{"messages not an array", `{"model":"gpt-test","messages":"hi"}`, 400, "messages", CodeInvalidValue},
		{"content a number", body("", `{"role":"user","content":5}`), 400, "messages[0].content", CodeInvalidValue},
		{"content an object", body("", `{"role":"user","content":{"text":"x"}}`), 400, "messages[0].content", CodeInvalidValue},
		{"content part without type", body("", `{"role":"user","content":[{"text":"x"}]}`), 400, "messages[0].content[0].type", CodeInvalidValue},
		{"user without content", body("", `{"role":"user"}`), 400, "messages[0].content", CodeInvalidValue},
		{"unknown role", body("", `{"role":"wizard","content":"x"}`), 400, "messages[0].role", CodeInvalidValue},
		{"temperature a string", body(`,"temperature":"hot"`), 400, "temperature", CodeInvalidValue},
		{"temperature out of range", body(`,"temperature":3`), 400, "temperature", CodeInvalidValue},
		{"top_p a bool", body(`,"top_p":true`), 400, "top_p", CodeInvalidValue},
		{"stream a string", body(`,"stream":"true"`), 400, "stream", CodeInvalidValue},
		{"stream_options an array", body(`,"stream_options":[]`), 400, "stream_options", CodeInvalidValue},
		{"stop a number", body(`,"stop":5`), 400, "stop", CodeInvalidValue},
		{"tools an object", body(`,"tools":{}`), 400, "tools", CodeInvalidValue},
		{"unknown model", `{"model":"gpt-nope","messages":[` + msg + `]}`, 404, "model", CodeModelNotFound},
		{"body too large", body(`,"pad":"` + strings.Repeat("x", 4096) + `"`), 413, "", CodeBodyTooLarge},
	} {
		res := do(t, "POST", edge.url+"/v1/chat/completions", tc.body, nil)
		got := decodeError(t, res)
		if res.StatusCode != tc.status || got.Type != "invalid_request_error" || got.Param != tc.param || got.Code != tc.code || got.Message == "" {
			t.Errorf("%s: %d %+v (param %q, code %q)", tc.name, res.StatusCode, got, got.Param, got.Code)
		}
	}
	// Over WebSocket, the same checks.
	conn := dialWS(t, edge)
	sendWS(t, conn, `{"type":"start","request":`+body(`,"max_tokens":99999`)+`}`)
	if m := readWS(t, conn); m.Type != "error" || m.Error.Code != CodeLimitExceeded || m.Error.Param != "max_tokens" {
		t.Fatalf("WebSocket start over the cap: %+v", m)
	}
	checkQueueEmpty(t, e)
	// What is within the limits is accepted.
	ok := body(`,"stream":true,"max_tokens":1000,"temperature":0.7,"stop":["x"],"stream_options":{"include_usage":true}`, msg, `{"role":"assistant","content":null,"tool_calls":[]}`,
		`{"role":"user","content":[{"type":"text","text":"hi"}]}`)
	if res := do(t, "POST", edge.url+"/v1/chat/completions", ok, nil); res.StatusCode != http.StatusOK {
		t.Fatalf("a valid request: %d %s", res.StatusCode, readAll(t, res))
	}
}

// Negative limits switch them off.
func TestInputLimitsOff(t *testing.T) {
	lim := limits{served: func(string) bool { return true }, maxMessages: -1, maxTokens: -1}
	msgs := strings.Repeat(`{"role":"user","content":"x"},`, 300)
	body := fmt.Sprintf(`{"model":"m","max_tokens":1000000,"messages":[%s]}`, strings.TrimSuffix(msgs, ","))
	if _, e := parseChatRequest([]byte(body), lim); e != nil {
		t.Fatal(e)
	}
}

// A client that breaks the WebSocket protocol is closed with a code that
// says how.
func TestWebSocketProtocolViolations(t *testing.T) {
	e := newEnv(t)
	edge := e.startEdge(Config{WSMaxMessagesPerSecond: 5})
	for _, tc := range []struct {
		name string
		send func(*websocket.Conn) error
		code int
	}{
		{"not JSON", text(`nope`), websocket.CloseUnsupportedData},
		{"unknown type", text(`{"type":"dance"}`), websocket.CloseUnsupportedData},
		{"field of the wrong type", text(`{"type":"resume","stream_id":5}`), websocket.CloseUnsupportedData},
		{"binary", func(c *websocket.Conn) error {
			return c.WriteMessage(websocket.BinaryMessage, []byte(`{"type":"cancel"}`))
		}, websocket.CloseUnsupportedData},
		{"flood", func(c *websocket.Conn) error {
			for range 50 {
				if err := c.WriteMessage(websocket.TextMessage, []byte(`{"type":"resume","stream_id":"x"}`)); err != nil {
					return nil // closed meanwhile
				}
			}
			return nil
		}, websocket.ClosePolicyViolation},
	} {
		conn := dialWS(t, edge)
		if err := tc.send(conn); err != nil {
			t.Fatal(err)
		}
		var err error
		for err == nil {
			_, _, err = conn.ReadMessage()
		}
		if ce, ok := errors.AsType[*websocket.CloseError](err); !ok || ce.Code != tc.code || ce.Text == "" {
			t.Errorf("%s: %v, want close %d with a reason", tc.name, err, tc.code)
		}
	}
	if got := edge.wsStats.closed[wsClosedUnsupported].Load(); got != 4 {
		t.Errorf("%d closed for unsupported data", got)
	}
	if got := edge.wsStats.closed[wsClosedFlood].Load(); got != 1 {
		t.Errorf("%d closed for flooding", got)
	}
	// Within the rate, messages are answered.
	conn := dialWS(t, edge)
	for range 3 {
		sendWS(t, conn, `{"type":"resume","stream_id":"x"}`)
		if m := readWS(t, conn); m.Type != "error" || m.Error.Code != CodeInvalidStreamID {
			t.Fatalf("%+v", m)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func text(s string) func(*websocket.Conn) error {
	return func(c *websocket.Conn) error { return c.WriteMessage(websocket.TextMessage, []byte(s)) }
}

func TestRateLimiter(t *testing.T) {
	now := time.Unix(0, 0)
	if unlimited := newRateLimiter(-1); !unlimited.AllowN(now, 1000) {
		t.Fatal("a negative rate limits")
	}
	l := newRateLimiter(2)
	for i := range 2 {
		if !l.AllowN(now, 1) {
			t.Fatalf("burst %d refused", i)
		}
	}
	if l.AllowN(now, 1) {
		t.Fatal("third at once allowed")
	}
	if !l.AllowN(now.Add(500*time.Millisecond), 1) {
		t.Fatal("refused after half a second at 2/s")
	}
	if l.AllowN(now.Add(600*time.Millisecond), 1) {
		t.Fatal("allowed too soon")
	}
	if slow := newRateLimiter(0.5); !slow.AllowN(now, 1) || slow.AllowN(now.Add(time.Second), 1) || !slow.AllowN(now.Add(2*time.Second), 1) {
		t.Fatal("0.5/s")
	}
}
