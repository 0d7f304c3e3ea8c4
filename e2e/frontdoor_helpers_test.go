package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/relaydev/relay/edge"
	"github.com/relaydev/relay/relay/config"
	"github.com/relaydev/relay/relay/mockupstream"
	"github.com/relaydev/relay/relay/natsconn"
	"github.com/relaydev/relay/relay/relaytest"
	"github.com/relaydev/relay/relay/wire"
)

// The client keys of the front-door tests: acme may use every model, beta
// only mock-2.
const (
	keyAcme     = "sk-acme-frontdoor-5d1f0c9e2b7a"
	keyBeta     = "sk-beta-frontdoor-8e3a6b1c4d2f"
	tokenSecret = "frontdoor-resume-secret-3f9a1c7e5b2d8046"
)

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// withTenants configures the edges with acme's and beta's keys, the shared
// token secret, and no anonymous access.
func withTenants(more func(*config.Config)) func(*config.Config) {
	return func(c *config.Config) {
		quickStop(c)
		c.Edge.AllowAnonymous = false
		c.Edge.APIKeys = []edge.APIKey{
			{Tenant: "acme", KeySHA256: sha256Hex(keyAcme)},
			{Tenant: "beta", KeySHA256: sha256Hex(keyBeta), Models: []string{"mock-2"}},
		}
		c.Edge.ResumeTokenSecret = tokenSecret
		if more != nil {
			more(c)
		}
	}
}

// quickStop makes the worker stop at once when the test ends, handing over
// what it still runs, instead of draining for up to drain_timeout.
func quickStop(c *config.Config) { c.Worker.DrainTimeout = -1 }

// send sends a request with headers; key, if set, goes into Authorization.
// A body is sent as JSON unless h names another Content-Type.
func send(t *testing.T, ctx context.Context, method, url string, body []byte, key string, h http.Header) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range h {
		req.Header[k] = v
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// apiError is an OpenAI error body.
type apiError struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	} `json:"error"`
}

// errorOf reads an error response: its status, code and raw body.
func errorOf(t *testing.T, resp *http.Response) (int, string, string) {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var e apiError
	if err := json.Unmarshal(b, &e); err != nil {
		t.Fatalf("status %d: not an error body: %s", resp.StatusCode, b)
	}
	code := ""
	if e.Error.Code != nil {
		code = *e.Error.Code
	}
	return resp.StatusCode, code, string(b)
}

// transcriptOf reads an SSE response to its end (or stop events).
func transcriptOf(t *testing.T, resp *http.Response, tr *transcript, stop int) *transcript {
	t.Helper()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	if tr == nil {
		tr = &transcript{}
	}
	must(t, tr.readUntil(sseOf(resp), stop))
	return tr
}

// dialWSKey opens a WebSocket with key; it returns the handshake's status
// when the server refused it.
func dialWSKey(t *testing.T, ctx context.Context, base, key string, h http.Header) (*websocket.Conn, int) {
	t.Helper()
	if h == nil {
		h = http.Header{}
	}
	if key != "" {
		h.Set("Authorization", "Bearer "+key)
	}
	conn, resp, err := websocket.DefaultDialer.DialContext(ctx, "ws"+strings.TrimPrefix(base, "http")+"/v1/ws", h)
	if err != nil {
		if resp == nil {
			t.Fatal(err)
		}
		return nil, resp.StatusCode
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	return conn, http.StatusSwitchingProtocols
}

// requestsQueued is how many requests ever reached the work queue.
func requestsQueued(t *testing.T, sys *system) uint64 {
	t.Helper()
	nc, js, err := natsconn.Connect(natsconn.Config{URL: sys.NATS.ClientURL()}, t.Name(), relaytest.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	stream, err := js.Stream(ctx, wire.RequestStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return info.State.LastSeq
}

// calls is how many chat requests for msgs reached the fake upstream.
func calls(sys *system, msgs []mockupstream.Message) int {
	return sys.Mock.Stats().ByConversation[mockupstream.ConversationKey(msgs)]
}
