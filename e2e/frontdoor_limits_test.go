package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/relaydev/relay/edge"
	"github.com/relaydev/relay/relay/config"
	"github.com/relaydev/relay/relay/mockupstream"
)

// Each input limit answers 400 (413 for the body) saying what is wrong,
// over HTTP and WebSocket, and nothing refused reaches JetStream or the
// upstream.
func TestFrontDoorInputLimits(t *testing.T) {
	sys := start(t, options{Mock: mockupstream.Config{Tokens: 5, TokenInterval: -1}, Tune: withTenants(func(c *config.Config) {
		c.Edge.MaxBodyBytes = 8 << 10
		c.Edge.MaxMessages = 4
		c.Edge.MaxTokensCap = 512
	})})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	msg := `{"role":"user","content":"hi"}`
	req := func(model, extra string, n int) []byte {
		return []byte(fmt.Sprintf(`{"model":%q,"stream":true,"messages":[%s]%s}`, model, strings.TrimSuffix(strings.Repeat(msg+",", n), ","), extra))
	}
	for _, tc := range []struct {
		name   string
		key    string
		body   []byte
		status int
		param  string
		code   string
	}{
		{"body too large", keyAcme, req("mock-1", `,"user":"`+strings.Repeat("x", 8<<10)+`"`, 1), 413, "", edge.CodeBodyTooLarge},
		{"too many messages", keyAcme, req("mock-1", "", 5), 400, "messages", edge.CodeLimitExceeded},
		{"max_tokens over the cap", keyAcme, req("mock-1", `,"max_tokens":513`, 1), 400, "max_tokens", edge.CodeLimitExceeded},
		{"model not in the key's list", keyBeta, req("mock-1", "", 1), 404, "model", edge.CodeModelNotFound},
		{"unknown model", keyAcme, req("gpt-5-ultra", "", 1), 404, "model", edge.CodeModelNotFound},
		{"malformed JSON", keyAcme, []byte(`{"model":"mock-1","messages":[`), 400, "", edge.CodeInvalidJSON},
		{"messages not an array", keyAcme, []byte(`{"model":"mock-1","messages":{"role":"user"}}`), 400, "messages", edge.CodeInvalidValue},
		{"content not a string or parts", keyAcme, []byte(`{"model":"mock-1","messages":[{"role":"user","content":42}]}`), 400, "messages[0].content", edge.CodeInvalidValue},
		{"temperature not a number", keyAcme, req("mock-1", `,"temperature":"warm"`, 1), 400, "temperature", edge.CodeInvalidValue},
		{"stream not a boolean", keyAcme, []byte(`{"model":"mock-1","stream":1,"messages":[` + msg + `]}`), 400, "stream", edge.CodeInvalidValue},
	} {
		resp := send(t, ctx, "POST", sys.Edges[0]+"/v1/chat/completions", tc.body, tc.key, nil)
		status, code, raw := errorOf(t, resp)
		if status != tc.status || code != tc.code || (tc.param != "" && !strings.Contains(raw, `"param":"`+tc.param+`"`)) {
			t.Errorf("%s: %d %s", tc.name, status, raw)
		}
	}
	conn, _ := dialWSKey(t, ctx, sys.Edges[0], keyAcme, nil)
	must(t, conn.WriteMessage(1, []byte(`{"type":"start","request":`+string(req("mock-1", "", 5))+`}`)))
	var m wsMessage
	must(t, conn.ReadJSON(&m))
	if m.Type != "error" {
		t.Fatalf("WebSocket start with too many messages: %+v", m)
	}
	if n := requestsQueued(t, sys); n != 0 {
		t.Fatalf("%d refused requests reached the work queue", n)
	}
	if n := sys.Mock.Stats().ChatRequests; n != 0 {
		t.Fatalf("%d refused requests reached the upstream", n)
	}
	// At the limits, a request is served.
	resp := send(t, ctx, "POST", sys.Edges[0]+"/v1/chat/completions", req("mock-2", `,"max_tokens":512`, 4), keyBeta, nil)
	if tr := transcriptOf(t, resp, nil, 0); tr.status != "done" {
		t.Fatalf("a request at the limits ended %q", tr.status)
	}
}

// A browser page on an allowed origin passes the preflight and can read
// the relay's headers; other origins cannot.
func TestFrontDoorCORS(t *testing.T) {
	sys := start(t, options{Mock: mockupstream.Config{Tokens: 3, TokenInterval: -1}, Tune: withTenants(func(c *config.Config) {
		c.Edge.CORSAllowedOrigins = []string{"https://chat.example.com"}
	})})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	pre := http.Header{
		"Origin":                         {"https://chat.example.com"},
		"Access-Control-Request-Method":  {"POST"},
		"Access-Control-Request-Headers": {"authorization,content-type,idempotency-key"},
	}
	resp := send(t, ctx, "OPTIONS", sys.Edges[0]+"/v1/chat/completions", nil, "", pre)
	if resp.StatusCode != http.StatusNoContent || resp.Header.Get("Access-Control-Allow-Origin") != "https://chat.example.com" ||
		!strings.Contains(resp.Header.Get("Access-Control-Allow-Headers"), "authorization") {
		t.Fatalf("preflight: %d %v", resp.StatusCode, resp.Header)
	}
	pre.Set("Origin", "https://evil.example.com")
	if resp := send(t, ctx, "OPTIONS", sys.Edges[0]+"/v1/chat/completions", nil, "", pre); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("preflight from another origin: %d", resp.StatusCode)
	}
	msgs, _ := prompt("CORS", 3)
	resp = send(t, ctx, "POST", sys.Edges[0]+"/v1/chat/completions", chatBody(t, msgs, true), keyAcme, http.Header{"Origin": {"https://chat.example.com"}})
	exposed := resp.Header.Get("Access-Control-Expose-Headers")
	if resp.Header.Get("Access-Control-Allow-Origin") != "https://chat.example.com" || !strings.Contains(exposed, "X-Relay-Stream-Id") || !strings.Contains(exposed, edge.HeaderResumeToken) {
		t.Fatalf("POST from the allowed origin: %v", resp.Header)
	}
	if h := resp.Header; h.Get("Cache-Control") != "no-cache, no-transform" || h.Get("X-Accel-Buffering") != "no" || h.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("SSE headers %v", h)
	}
	if _, status := dialWSKey(t, ctx, sys.Edges[0], keyAcme, http.Header{"Origin": {"https://evil.example.com"}}); status != http.StatusForbidden {
		t.Fatalf("WebSocket from another origin: %d", status)
	}
	if _, status := dialWSKey(t, ctx, sys.Edges[0], keyAcme, http.Header{"Origin": {"https://chat.example.com"}}); status != http.StatusSwitchingProtocols {
		t.Fatalf("WebSocket from the allowed origin: %d", status)
	}
}
