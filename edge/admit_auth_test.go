package edge

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/nats-io/nats.go"
	"github.com/relaydev/relay/relay/dialect/chat"
	"github.com/relaydev/relay/relay/wire"
	"slices"
)

// Keys of the tenants the tests authenticate as.
const (
	keyAcme = "sk-acme-0123456789abcdef"
	keyBeta = "sk-beta-0123456789abcdef"
	// tokenSecret is a resume token secret of the right length.
	tokenSecret = "0123456789abcdef0123456789abcdef"
)

func keyHash(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// tenantConfig has two tenants: acme may use every model, beta only
// otherModel.
func tenantConfig() Config {
	return Config{
		APIKeys: []APIKey{
			{Tenant: "acme", KeySHA256: keyHash(keyAcme)},
			{Tenant: "beta", KeySHA256: strings.ToUpper(keyHash(keyBeta)), Models: []string{otherModel}},
		},
		ResumeTokenSecret: tokenSecret,
	}
}

func bearerHeader(key string) http.Header {
	return http.Header{"Authorization": {"Bearer " + key}}
}

// dialWSWith opens a WebSocket with the given request headers.
func dialWSWith(t *testing.T, edge *testEdge, h http.Header) (*websocket.Conn, *http.Response, error) {
	t.Helper()
	conn, res, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(edge.url, "http")+"/v1/ws", h)
	if conn != nil {
		t.Cleanup(func() { conn.Close() })
		conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	}
	return conn, res, err
}

func TestAuthentication(t *testing.T) {
	e := newEnv(t)
	edge := e.startEdge(tenantConfig())
	post := func(h http.Header) *http.Response {
		return do(t, "POST", edge.url+"/v1/chat/completions", chatBody(false, "hi"), h)
	}
	for name, h := range map[string]http.Header{
		"no key":        nil,
		"wrong key":     bearerHeader("sk-wrong"),
		"hash as key":   bearerHeader(keyHash(keyAcme)),
		"not bearer":    {"Authorization": {"Basic " + keyAcme}},
		"empty bearer":  {"Authorization": {"Bearer "}},
		"key prefix":    bearerHeader(keyAcme[:len(keyAcme)-1]),
		"token instead": {"X-Relay-Resume-Token": {"v1.x.y.z"}},
	} {
		res := post(h)
		got := decodeError(t, res)
		if res.StatusCode != http.StatusUnauthorized || got.Type != "invalid_request_error" || got.Code != CodeInvalidAPIKey ||
			!strings.HasPrefix(res.Header.Get("WWW-Authenticate"), "Bearer") {
			t.Errorf("%s: %d %+v", name, res.StatusCode, got)
		}
		if strings.Contains(got.Message, keyAcme) || strings.Contains(got.Message, "sk-wrong") {
			t.Errorf("%s: the error repeats the key: %s", name, got.Message)
		}
	}
	// Every API route needs a key; health checks do not.
	for _, path := range []string{"/v1/models", "/v1/streams/" + wire.NewStreamID(), "/v1/ws", "/v1/nope"} {
		if res := do(t, "GET", edge.url+path, "", nil); res.StatusCode != http.StatusUnauthorized {
			t.Errorf("GET %s without a key: %d", path, res.StatusCode)
		}
	}
	if res := do(t, "DELETE", edge.url+"/v1/streams/"+wire.NewStreamID(), "", nil); res.StatusCode != http.StatusUnauthorized {
		t.Errorf("DELETE without a key: %d", res.StatusCode)
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		if res := do(t, "GET", edge.url+path, "", nil); res.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %d", path, res.StatusCode)
		}
	}
	if _, res, err := dialWSWith(t, edge, nil); err == nil || res == nil || res.StatusCode != http.StatusUnauthorized {
		t.Errorf("WebSocket without a key: %v", err)
	}
	if _, res, err := dialWSWith(t, edge, bearerHeader("sk-wrong")); err == nil || res == nil || res.StatusCode != http.StatusUnauthorized {
		t.Errorf("WebSocket with a wrong key: %v", err)
	}
	if _, _, err := dialWSWith(t, edge, bearerHeader(keyAcme)); err != nil {
		t.Errorf("WebSocket with a key: %v", err)
	}
	// A browser cannot set headers on a WebSocket: it offers its key as a
	// subprotocol, which the edge never echoes.
	url := "ws" + strings.TrimPrefix(edge.url, "http") + "/v1/ws"
	for name, tc := range map[string]struct {
		protocols []string
		status    int
	}{
		"key":           {[]string{"relay", "relay.bearer." + base64.RawURLEncoding.EncodeToString([]byte(keyAcme))}, http.StatusSwitchingProtocols},
		"wrong key":     {[]string{"relay", "relay.bearer." + base64.RawURLEncoding.EncodeToString([]byte("sk-wrong"))}, http.StatusUnauthorized},
		"not base64url": {[]string{"relay", "relay.bearer.sk-acme+0123"}, http.StatusUnauthorized},
		"no key":        {[]string{"relay"}, http.StatusUnauthorized},
	} {
		dialer := websocket.Dialer{Subprotocols: tc.protocols}
		conn, res, err := dialer.Dial(url, nil)
		if res == nil || res.StatusCode != tc.status {
			t.Errorf("WebSocket with subprotocols, %s: %v %v, want %d", name, res, err, tc.status)
			continue
		}
		if conn != nil {
			if got := conn.Subprotocol(); got != "relay" {
				t.Errorf("WebSocket with subprotocols, %s: the edge chose %q, want relay", name, got)
			}
			conn.Close()
		}
	}

	// A model outside the key's list is refused like an unknown one, and
	// not listed.
	res := do(t, "POST", edge.url+"/v1/chat/completions", chatBody(false, "hi"), bearerHeader(keyBeta))
	if got := decodeError(t, res); res.StatusCode != http.StatusNotFound || got.Code != CodeModelNotFound || got.Param != "model" {
		t.Errorf("beta asking for %s: %d %+v", testModel, res.StatusCode, got)
	}
	var list modelList
	if err := jsonDecode(do(t, "GET", edge.url+"/v1/models", "", bearerHeader(keyBeta)), &list); err != nil || len(list.Data) != 1 || list.Data[0].ID != otherModel {
		t.Errorf("beta's models: %+v, %v", list, err)
	}
	if err := jsonDecode(do(t, "GET", edge.url+"/v1/models", "", bearerHeader(keyAcme)), &list); err != nil || len(list.Data) != 2 {
		t.Errorf("acme's models: %+v, %v", list, err)
	}
	checkQueueEmpty(t, e)
}

// Anonymous requests are served next to keys only when allowed, and a
// wrong key is never taken for anonymous.
func TestAllowAnonymous(t *testing.T) {
	e := newEnv(t)
	e.startWorker(&worker{script: answer(2)})
	cfg := tenantConfig()
	cfg.AllowAnonymous = true
	edge := e.startEdge(cfg)
	res := do(t, "POST", edge.url+"/v1/chat/completions", chatBody(false, "hi"), nil)
	id := res.Header.Get("X-Relay-Stream-Id")
	if res.StatusCode != http.StatusOK {
		t.Fatalf("anonymous POST: %d %s", res.StatusCode, readAll(t, res))
	}
	if meta, _ := e.meta(id); meta.Tenant != "" {
		t.Fatalf("anonymous stream has tenant %q", meta.Tenant)
	}
	if res := do(t, "POST", edge.url+"/v1/chat/completions", chatBody(false, "hi"), bearerHeader("sk-wrong")); res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("wrong key with anonymous allowed: %d", res.StatusCode)
	}
	// The anonymous stream is not acme's, and acme's not anonymous.
	if res := do(t, "GET", edge.url+"/v1/streams/"+id, "", bearerHeader(keyAcme)); res.StatusCode != http.StatusNotFound {
		t.Fatalf("acme reading an anonymous stream: %d", res.StatusCode)
	}
	if res := do(t, "GET", edge.url+"/v1/streams/"+id, "", nil); res.StatusCode != http.StatusOK {
		t.Fatalf("anonymous resume: %d", res.StatusCode)
	}
}

// A stream of one tenant is, to every other, exactly an unknown stream:
// resume, cancel and the WebSocket messages all answer 404.
func TestStreamsBelongToTheirTenant(t *testing.T) {
	e := newEnv(t)
	w := e.startWorker(&worker{script: answer(4), gate: make(chan struct{})})
	edge := e.startEdge(tenantConfig())
	res := do(t, "POST", edge.url+"/v1/chat/completions", chatBody(true, "hi"), bearerHeader(keyAcme))
	id := res.Header.Get("X-Relay-Stream-Id")
	if res.StatusCode != http.StatusOK || !wire.ValidStreamID(id) {
		t.Fatalf("POST: %d", res.StatusCode)
	}
	if meta, _ := e.meta(id); meta.Tenant != "acme" {
		t.Fatalf("stream of tenant %q", meta.Tenant)
	}
	unknown := wire.NewStreamID()
	same := func(what string, got, want *http.Response, gotID, wantID string) {
		t.Helper()
		g, wnt := readAll(t, got), readAll(t, want)
		if got.StatusCode != http.StatusNotFound || got.StatusCode != want.StatusCode || strings.ReplaceAll(g, gotID, wantID) != wnt {
			t.Errorf("%s: %d %s\nunknown stream: %d %s", what, got.StatusCode, g, want.StatusCode, wnt)
		}
	}
	same("beta resumes", do(t, "GET", edge.url+"/v1/streams/"+id, "", bearerHeader(keyBeta)),
		do(t, "GET", edge.url+"/v1/streams/"+unknown, "", bearerHeader(keyBeta)), id, unknown)
	same("beta resumes after a cursor", do(t, "GET", edge.url+"/v1/streams/"+id+"?last_event_id=1-2", "", bearerHeader(keyBeta)),
		do(t, "GET", edge.url+"/v1/streams/"+unknown+"?last_event_id=1-2", "", bearerHeader(keyBeta)), id, unknown)
	same("beta cancels", do(t, "DELETE", edge.url+"/v1/streams/"+id, "", bearerHeader(keyBeta)),
		do(t, "DELETE", edge.url+"/v1/streams/"+unknown, "", bearerHeader(keyBeta)), id, unknown)

	conn, _, err := dialWSWith(t, edge, bearerHeader(keyBeta))
	if err != nil {
		t.Fatal(err)
	}
	for _, msg := range []string{`{"type":"resume","stream_id":"` + id + `"}`, `{"type":"cancel","stream_id":"` + id + `"}`} {
		sendWS(t, conn, msg)
		if m := readWS(t, conn); m.Type != "error" || m.Error.Code != CodeStreamNotFound || m.StreamID != id {
			t.Errorf("beta over WebSocket %s: %+v", msg, m)
		}
	}
	if meta, _ := e.meta(id); meta.Cancelled {
		t.Fatal("beta cancelled acme's stream")
	}

	// acme itself reads and cancels it.
	close(w.gate)
	if res := do(t, "GET", edge.url+"/v1/streams/"+id, "", bearerHeader(keyAcme)); res.StatusCode != http.StatusOK {
		t.Fatalf("acme resumes: %d", res.StatusCode)
	} else if got := checkAnswer(t, readAll(t, res), 4); got != words(4) {
		t.Fatalf("acme resumed %q", got)
	}
	conn, _, err = dialWSWith(t, edge, bearerHeader(keyAcme))
	if err != nil {
		t.Fatal(err)
	}
	sendWS(t, conn, `{"type":"cancel","stream_id":"`+id+`"}`)
	if m := readWS(t, conn); m.Type != "cancellation" || m.Status != wire.StatusDone {
		t.Fatalf("acme cancels its finished stream: %+v", m)
	}
}

func TestResumeTokens(t *testing.T) {
	e := newEnv(t)
	e.startWorker(&worker{script: answer(3)})
	edge := e.startEdge(tenantConfig())
	clock := &testClock{}
	edge.tokens.now = clock.now
	start := func() (string, string, string) {
		res := do(t, "POST", edge.url+"/v1/chat/completions", chatBody(true, "hi"), bearerHeader(keyAcme))
		return res.Header.Get("X-Relay-Stream-Id"), res.Header.Get(HeaderResumeToken), readAll(t, res)
	}
	id, token, body := start()
	other, otherToken, _ := start()
	if token == "" || otherToken == "" || token == otherToken {
		t.Fatalf("tokens %q %q", token, otherToken)
	}
	// The first event carries the token too, the others do not.
	frames := frameEvents(parseSSE(t, body))
	if first := decodeRelay(t, frames[0].Data); first.ResumeToken != token {
		t.Fatalf("first event's token %q, want the header's", first.ResumeToken)
	}
	if strings.Count(body, token) != 1 {
		t.Fatalf("the token is in %d events", strings.Count(body, token))
	}

	// The token replaces the key for that stream, after a cursor too.
	res := do(t, "GET", edge.url+"/v1/streams/"+id+"?token="+token, "", nil)
	if got := checkAnswer(t, readAll(t, res), 3); res.StatusCode != http.StatusOK || got != words(3) {
		t.Fatalf("resume with the token: %d %q", res.StatusCode, got)
	}
	res = do(t, "GET", edge.url+"/v1/streams/"+id+"?token="+token+"&last_event_id="+frames[1].ID, "", nil)
	if rest := frameEvents(parseSSE(t, readAll(t, res))); res.StatusCode != http.StatusOK || len(rest) != 2 {
		t.Fatalf("resume with the token after a cursor: %d, %d frames", res.StatusCode, len(rest))
	}

	// Forged, foreign, expired: one 403, whatever the stream.
	forged := token[:len(token)-2] + flip(token[len(token)-2:])
	resigned := strings.Join(append(strings.Split(token, ".")[:1], b64("beta"), strings.Split(token, ".")[2], strings.Split(token, ".")[3]), ".")
	refused := map[string]string{
		"forged signature": "/v1/streams/" + id + "?token=" + forged,
		"other tenant":     "/v1/streams/" + id + "?token=" + resigned,
		"other stream":     "/v1/streams/" + id + "?token=" + otherToken,
		"other stream's":   "/v1/streams/" + other + "?token=" + token,
		"unknown stream":   "/v1/streams/" + wire.NewStreamID() + "?token=" + token,
		"garbage":          "/v1/streams/" + id + "?token=garbage",
		"long":             "/v1/streams/" + id + "?token=" + strings.Repeat("a", 600),
	}
	clock.advance(DefaultResumeTokenTTL + time.Second)
	refused["expired"] = "/v1/streams/" + id + "?token=" + token
	var want string
	for name, path := range refused {
		res := do(t, "GET", edge.url+path, "", nil)
		body := readAll(t, res)
		if want == "" {
			want = body
		}
		if res.StatusCode != http.StatusForbidden || body != want || !strings.Contains(body, CodeInvalidResumeToken) {
			t.Errorf("%s: %d %s", name, res.StatusCode, body)
		}
	}
	clock.advance(-DefaultResumeTokenTTL - time.Second)
	// A token is for reading only.
	if res := do(t, "DELETE", edge.url+"/v1/streams/"+id+"?token="+token, "", nil); res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("DELETE with a token: %d", res.StatusCode)
	}
	// Another edge with the same secret accepts it; one with another
	// secret does not.
	edge2 := e.startEdge(tenantConfig())
	if res := do(t, "GET", edge2.url+"/v1/streams/"+id+"?token="+token, "", nil); res.StatusCode != http.StatusOK {
		t.Fatalf("another edge: %d", res.StatusCode)
	}
	cfg := tenantConfig()
	cfg.ResumeTokenSecret = strings.Repeat("x", 32)
	edge3 := e.startEdge(cfg)
	if res := do(t, "GET", edge3.url+"/v1/streams/"+id+"?token="+token, "", nil); res.StatusCode != http.StatusForbidden {
		t.Fatalf("an edge with another secret: %d", res.StatusCode)
	}

	// The WebSocket started message carries a token.
	conn, _, err := dialWSWith(t, edge, bearerHeader(keyAcme))
	if err != nil {
		t.Fatal(err)
	}
	sendWS(t, conn, `{"type":"start","request":`+chatBody(true, "ws")+`}`)
	var started struct {
		Type        string `json:"type"`
		StreamID    string `json:"stream_id"`
		ResumeToken string `json:"resume_token"`
	}
	if err := conn.ReadJSON(&started); err != nil || started.Type != "started" {
		t.Fatalf("started: %+v, %v", started, err)
	}
	if tenant, ok := edge.tokens.verify(started.ResumeToken, started.StreamID); !ok || tenant != "acme" {
		t.Fatalf("started token %q: %q %v", started.ResumeToken, tenant, ok)
	}
}

func decodeRelay(t *testing.T, data string) chat.ChunkRelay {
	t.Helper()
	var c struct {
		Relay chat.ChunkRelay `json:"relay"`
	}
	if err := decodeInto(data, &c); err != nil {
		t.Fatal(err)
	}
	return c.Relay
}

func flip(s string) string {
	b := []byte(s)
	for i := range b {
		if b[i] == 'A' {
			b[i] = 'B'
		} else {
			b[i] = 'A'
		}
	}
	return string(b)
}

func b64(s string) string {
	tok := (&resumeTokens{secret: []byte("x"), ttl: time.Hour, now: time.Now}).issue("id", s)
	return strings.Split(tok, ".")[1]
}

func TestResumeTokenUnit(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	tokens := &resumeTokens{secret: []byte(tokenSecret), ttl: time.Minute, now: func() time.Time { return now }}
	id := wire.NewStreamID()
	token := tokens.issue(id, "acme.eu")
	if tenant, ok := tokens.verify(token, id); !ok || tenant != "acme.eu" {
		t.Fatalf("verify: %q %v", tenant, ok)
	}
	if _, ok := tokens.verify(token, wire.NewStreamID()); ok {
		t.Fatal("verified for another stream")
	}
	anon := tokens.issue(id, "")
	if tenant, ok := tokens.verify(anon, id); !ok || tenant != "" {
		t.Fatalf("anonymous token: %q %v", tenant, ok)
	}
	now = now.Add(time.Minute)
	if _, ok := tokens.verify(token, id); ok {
		t.Fatal("verified at its expiry")
	}
	random, isRandom := newResumeTokens("", time.Minute)
	if !isRandom || len(random.secret) != 32 {
		t.Fatal("no random secret")
	}
	if _, ok := random.verify(token, id); ok {
		t.Fatal("another secret verified it")
	}
}

// checkQueueEmpty fails unless no request was ever queued and no stream
// metadata stored: nothing refused reaches JetStream.
func checkQueueEmpty(t *testing.T, e *env) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	stream, err := e.js.Stream(ctx, wire.RequestStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.LastSeq != 0 {
		t.Fatalf("%d requests were queued", info.State.LastSeq)
	}
	kv, err := e.js.KeyValue(ctx, wire.MetaBucket)
	if err != nil {
		t.Fatal(err)
	}
	if keys, err := kv.ListKeys(ctx); err != nil {
		t.Fatal(err)
	} else {
		for k := range keys.Keys() {
			t.Fatalf("stream %s was stored", k)
		}
	}
}

// testClock is a clock a test moves while the edge reads it.
type testClock struct{ skew atomic.Int64 }

func (c *testClock) now() time.Time { return time.Now().Add(time.Duration(c.skew.Load())) }

func (c *testClock) advance(d time.Duration) { c.skew.Add(int64(d)) }

// A key's model list travels with its requests, so that the worker keeps
// their fallbacks within it; a key of every model sends none.
func TestQueuedRequestNamesTheKeysModels(t *testing.T) {
	e := newEnv(t)
	e.startWorker(&worker{script: answer(2)})
	edge := e.startEdge(tenantConfig())
	queued := make(chan *nats.Msg, 2)
	sub, err := e.nc.ChanSubscribe(wire.RequestSubject, queued)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	body := strings.Replace(chatBody(false, "hi"), testModel, otherModel, 1)
	for key, want := range map[string][]string{keyBeta: {otherModel}, keyAcme: nil} {
		if res := do(t, "POST", edge.url+"/v1/chat/completions", body, bearerHeader(key)); res.StatusCode != http.StatusOK {
			t.Fatalf("POST: %d %s", res.StatusCode, readAll(t, res))
		}
		var msg *nats.Msg
		select {
		case msg = <-queued:
		case <-time.After(10 * time.Second):
			t.Fatal("no request message heard")
		}
		req, err := wire.DecodeRequest(msg.Data)
		if err != nil || !slices.Equal(req.Models, want) {
			t.Errorf("queued request names models %q, %v; want %q", req.Models, err, want)
		}
	}
}
