package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/relaydev/relay/edge"
	"github.com/relaydev/relay/relay/config"
	"github.com/relaydev/relay/relay/mockupstream"
	"github.com/relaydev/relay/relay/wire"
)

// Unauthenticated, wrong-key and cross-tenant requests are refused on
// every route, over HTTP and WebSocket; a foreign stream answers exactly
// like an unknown one. The owner resumes on the other edge and gets the
// exact text.
func TestFrontDoorAuthAndTenants(t *testing.T) {
	const tokens = 40
	sys := start(t, options{Edges: 2, Mock: mockupstream.Config{Tokens: tokens, TokenInterval: 5 * time.Millisecond}, Tune: withTenants(nil)})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	msgs, want := prompt("Whose stream is this?", tokens)
	body := chatBody(t, msgs, true)
	chat := sys.Edges[0] + "/v1/chat/completions"

	for name, key := range map[string]string{"no key": "", "wrong key": "sk-not-a-key", "hash of a key": sha256Hex(keyAcme)} {
		status, code, raw := errorOf(t, send(t, ctx, "POST", chat, body, key, nil))
		if status != http.StatusUnauthorized || code != edge.CodeInvalidAPIKey || !strings.Contains(raw, `"type":"invalid_request_error"`) {
			t.Errorf("%s: %d %s", name, status, raw)
		}
		if _, status := dialWSKey(t, ctx, sys.Edges[1], key, nil); status != http.StatusUnauthorized {
			t.Errorf("%s: WebSocket upgrade answered %d", name, status)
		}
	}
	if got := sys.Mock.Stats().ChatRequests; got != 0 {
		t.Fatalf("refused requests reached the upstream %d times", got)
	}

	// acme starts a stream and reads a few events.
	resp := send(t, ctx, "POST", chat, body, keyAcme, nil)
	id := resp.Header.Get("X-Relay-Stream-Id")
	tr := transcriptOf(t, resp, nil, 5)
	resp.Body.Close()

	// To beta (and to nobody) it is an unknown stream, on either edge.
	unknown := wire.NewStreamID()
	for _, base := range sys.Edges {
		for _, tc := range []struct{ method, path string }{
			{"GET", "/v1/streams/"},
			{"DELETE", "/v1/streams/"},
		} {
			s1, _, foreign := errorOf(t, send(t, ctx, tc.method, base+tc.path+id, nil, keyBeta, http.Header{"Last-Event-ID": {tr.lastID}}))
			s2, _, missing := errorOf(t, send(t, ctx, tc.method, base+tc.path+unknown, nil, keyBeta, http.Header{"Last-Event-ID": {tr.lastID}}))
			if s1 != http.StatusNotFound || s1 != s2 || strings.ReplaceAll(foreign, id, unknown) != missing {
				t.Errorf("beta %s %s: %d %s\nunknown stream: %d %s", tc.method, tc.path, s1, foreign, s2, missing)
			}
			if s, _, _ := errorOf(t, send(t, ctx, tc.method, base+tc.path+id, nil, "", nil)); s != http.StatusUnauthorized {
				t.Errorf("anonymous %s: %d", tc.method, s)
			}
		}
		conn, _ := dialWSKey(t, ctx, base, keyBeta, nil)
		for _, typ := range []string{"resume", "cancel"} {
			must(t, conn.WriteJSON(map[string]string{"type": typ, "stream_id": id}))
			var m struct {
				Type     string `json:"type"`
				StreamID string `json:"stream_id"`
				Error    struct {
					Code string `json:"code"`
				} `json:"error"`
			}
			must(t, conn.ReadJSON(&m))
			if m.Type != "error" || m.StreamID != id || m.Error.Code != edge.CodeStreamNotFound {
				t.Errorf("beta's WebSocket %s: %+v", typ, m)
			}
		}
	}

	// acme resumes on the other edge: exactly the rest.
	resp = send(t, ctx, "GET", sys.Edges[1]+"/v1/streams/"+id, nil, keyAcme, http.Header{"Last-Event-ID": {tr.lastID}})
	transcriptOf(t, resp, tr, 0)
	if got := tr.text.String(); got != want || tr.status != "done" {
		t.Fatalf("acme's text %q (status %s), want %q", got, tr.status, want)
	}
	if n := calls(sys, msgs); n != 1 {
		t.Fatalf("%d upstream calls", n)
	}
}

// A resume token lets a client without its key (an EventSource) resume
// its stream on any edge; forged, expired and other streams' tokens get one
// 403 that says nothing about the stream.
func TestFrontDoorResumeTokens(t *testing.T) {
	const tokens = 30
	const ttl = 1500 * time.Millisecond
	sys := start(t, options{Edges: 2, Mock: mockupstream.Config{Tokens: tokens, TokenInterval: 2 * time.Millisecond},
		Tune: withTenants(func(c *config.Config) { c.Edge.ResumeTokenTTL = ttl })})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	msgs, want := prompt("Resume me from a browser.", tokens)
	issued := time.Now()
	resp := send(t, ctx, "POST", sys.Edges[0]+"/v1/chat/completions", chatBody(t, msgs, true), keyAcme, nil)
	id, token := resp.Header.Get("X-Relay-Stream-Id"), resp.Header.Get(edge.HeaderResumeToken)
	if token == "" {
		t.Fatal("no resume token")
	}
	// The first event carries the token for a client that cannot read
	// headers.
	ev, err := sseOf(resp).Next()
	must(t, err)
	var first struct {
		Relay struct {
			ResumeToken string `json:"resume_token"`
		} `json:"relay"`
	}
	must(t, json.Unmarshal([]byte(ev.Data), &first))
	if first.Relay.ResumeToken != token {
		t.Fatalf("first event's token %q, header's %q", first.Relay.ResumeToken, token)
	}
	tr := &transcript{}
	must(t, tr.add(ev))
	resp.Body.Close()

	other := send(t, ctx, "POST", sys.Edges[0]+"/v1/chat/completions", chatBody(t, msgs, false), keyAcme, nil)
	otherID, otherToken := other.Header.Get("X-Relay-Stream-Id"), other.Header.Get(edge.HeaderResumeToken)

	// The token, no key, on the other edge, with the cursor as an
	// EventSource sends it.
	resp = send(t, ctx, "GET", sys.Edges[1]+"/v1/streams/"+id+"?token="+token, nil, "", http.Header{"Last-Event-ID": {tr.lastID}})
	transcriptOf(t, resp, tr, 0)
	if got := tr.text.String(); got != want {
		t.Fatalf("text %q, want %q", got, want)
	}
	if time.Since(issued) >= ttl {
		t.Fatalf("too slow: the token expired before it was used (%v)", time.Since(issued))
	}

	forged := []byte(token)
	forged[len(forged)-3] ^= 1
	var refusal string
	check := func(name, path string) {
		t.Helper()
		status, code, raw := errorOf(t, send(t, ctx, "GET", sys.Edges[1]+path, nil, "", nil))
		if refusal == "" {
			refusal = raw
		}
		if status != http.StatusForbidden || code != edge.CodeInvalidResumeToken || raw != refusal || strings.Contains(raw, id) {
			t.Errorf("%s: %d %s", name, status, raw)
		}
	}
	check("forged", "/v1/streams/"+id+"?token="+string(forged))
	check("another stream's token", "/v1/streams/"+id+"?token="+otherToken)
	check("this token on another stream", "/v1/streams/"+otherID+"?token="+token)
	check("this token on an unknown stream", "/v1/streams/"+wire.NewStreamID()+"?token="+token)
	time.Sleep(time.Until(issued.Add(ttl + 100*time.Millisecond)))
	check("expired", "/v1/streams/"+id+"?token="+token)
}
