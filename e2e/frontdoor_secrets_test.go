package e2e

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/relaydev/relay/edge"
	"github.com/relaydev/relay/relay/config"
	"github.com/relaydev/relay/relay/mockupstream"
)

// syncBuffer collects the log of every role.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// A full system runs with every kind of secret: client keys, a resume
// token secret, provider keys (one of them revoked, so the worker rotates),
// a NATS password. Clients fail authentication, present forged tokens,
// resume with real ones, cancel and use WebSockets. No secret, and no token
// issued or presented, appears anywhere in the log of any role, from start
// to shutdown.
func TestFrontDoorNoSecretsInLogs(t *testing.T) {
	const (
		natsPassword   = "nats-pw-7c1e9a4f2b6d8035"
		providerLive   = "sk-provider-live-4a8c2e6f1b3d"
		providerRevoke = "sk-provider-revoked-9d7b5f3a1c2e"
		wrongKey       = "sk-client-wrong-6e2a9c4f7b1d"
	)
	logs := &syncBuffer{}
	secrets := []string{keyAcme, keyBeta, tokenSecret, natsPassword, providerLive, providerRevoke, wrongKey, sha256Hex(wrongKey)}
	var tokens []string
	// Registered before start, so it runs after the system stopped: the
	// shutdown's log lines are scanned too.
	t.Cleanup(func() {
		all := logs.String()
		if !strings.Contains(all, "api key refused") || !strings.Contains(all, "role=edge") || !strings.Contains(all, "role=worker") {
			t.Errorf("the log misses lines the test relies on; %d bytes:\n%s", len(all), all)
		}
		for _, s := range append(secrets, tokens...) {
			if strings.Contains(all, s) {
				t.Errorf("the log contains the secret %q", s)
			}
		}
	})
	const n = 20
	sys := start(t, options{
		Edges: 2, Logs: logs, NATSPassword: natsPassword,
		Mock: mockupstream.Config{Tokens: n, TokenInterval: 2 * time.Millisecond, APIKeys: []string{providerLive}},
		Tune: withTenants(func(c *config.Config) {
			c.Providers[0].APIKeys = []string{providerRevoke, providerLive}
		}),
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	msgs, want := prompt("Keep my secrets.", n)
	chat := sys.Edges[0] + "/v1/chat/completions"

	for _, key := range []string{"", wrongKey, sha256Hex(keyAcme)} {
		if s, _, _ := errorOf(t, send(t, ctx, "POST", chat, chatBody(t, msgs, true), key, nil)); s != http.StatusUnauthorized {
			t.Fatalf("POST with %q: %d", key, s)
		}
		if _, s := dialWSKey(t, ctx, sys.Edges[1], key, nil); s != http.StatusUnauthorized {
			t.Fatalf("WebSocket with %q: %d", key, s)
		}
	}
	resp := send(t, ctx, "POST", chat, chatBody(t, msgs, true), keyAcme, http.Header{edge.HeaderIdempotencyKey: {"secret-test"}})
	id, token := resp.Header.Get("X-Relay-Stream-Id"), resp.Header.Get(edge.HeaderResumeToken)
	tokens = append(tokens, token)
	tr := transcriptOf(t, resp, nil, 3)
	resp.Body.Close()
	resp = send(t, ctx, "GET", sys.Edges[1]+"/v1/streams/"+id+"?token="+token, nil, "", http.Header{"Last-Event-ID": {tr.lastID}})
	if transcriptOf(t, resp, tr, 0); tr.text.String() != want {
		t.Fatalf("text %q, want %q", tr.text.String(), want)
	}
	forged := token[:len(token)-4] + "AAAA"
	tokens = append(tokens, forged)
	if s, _, _ := errorOf(t, send(t, ctx, "GET", sys.Edges[0]+"/v1/streams/"+id+"?token="+forged, nil, "", nil)); s != http.StatusForbidden {
		t.Fatalf("forged token: %d", s)
	}
	if s, _, _ := errorOf(t, send(t, ctx, "DELETE", sys.Edges[0]+"/v1/streams/"+id+"?token="+token, nil, "", nil)); s != http.StatusUnauthorized {
		t.Fatalf("DELETE with a token: %d", s)
	}
	if s, _, _ := errorOf(t, send(t, ctx, "DELETE", sys.Edges[0]+"/v1/streams/"+id, nil, keyBeta, nil)); s != http.StatusNotFound {
		t.Fatalf("beta's DELETE: %d", s)
	}

	// Over WebSocket: a start (its token), a cancel, then garbage.
	conn, _ := dialWSKey(t, ctx, sys.Edges[1], keyAcme, nil)
	long, _ := prompt("A longer one to cancel. [[mock: stall_before=5s]]", n)
	req := map[string]any{"model": "mock-1", "messages": long}
	must(t, conn.WriteJSON(map[string]any{"type": "start", "request": req}))
	var started struct {
		Type        string `json:"type"`
		StreamID    string `json:"stream_id"`
		ResumeToken string `json:"resume_token"`
	}
	must(t, conn.ReadJSON(&started))
	tokens = append(tokens, started.ResumeToken)
	must(t, conn.WriteJSON(map[string]string{"type": "cancel", "stream_id": started.StreamID}))
	for {
		var m wsMessage
		must(t, conn.ReadJSON(&m))
		if m.Type == "cancellation" {
			break
		}
	}
	must(t, conn.WriteMessage(websocket.TextMessage, []byte("not json "+keyAcme)))
	var err error
	for err == nil { // the cancelled stream's end may come first
		_, _, err = conn.ReadMessage()
	}
	if !websocket.IsCloseError(err, websocket.CloseUnsupportedData) {
		t.Fatalf("garbage: %v, want close 1003", err)
	}
	if strings.Contains(logs.String(), token) {
		t.Fatal("a resume token is in the log")
	}
}
