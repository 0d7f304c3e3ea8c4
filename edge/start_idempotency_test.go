package edge

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/relaydev/relay/relay/wire"
)

func TestIdempotencyKeyAttaches(t *testing.T) {
	e := newEnv(t)
	w := e.startWorker(&worker{script: answer(3), gate: make(chan struct{})})
	// The gated worker holds the first frame: each streamed POST gets its
	// head after one keepalive (follow_first_frame.go), well within the ack wait.
	cfg := tenantConfig()
	cfg.Keepalive = 20 * time.Millisecond
	edge := e.startEdge(cfg)
	clock := &testClock{}
	edge.now = clock.now
	post := func(key, tenantKey, content string, stream bool) *http.Response {
		h := bearerHeader(tenantKey)
		if key != "" {
			h.Set(HeaderIdempotencyKey, key)
		}
		return do(t, "POST", edge.url+"/v1/chat/completions", chatBody(stream, content), h)
	}

	// Running: the replay is served the same stream from the start.
	first := post("k1", keyAcme, "hi", true)
	id := first.Header.Get("X-Relay-Stream-Id")
	replay := post("k1", keyAcme, "hi", true)
	if got := replay.Header.Get("X-Relay-Stream-Id"); got != id || replay.Header.Get(HeaderIdempotentReplayed) != "true" || first.Header.Get(HeaderIdempotentReplayed) != "" {
		t.Fatalf("replay got stream %q (first %q), replayed %q", got, id, replay.Header.Get(HeaderIdempotentReplayed))
	}
	if replay.Header.Get(HeaderResumeToken) == "" {
		t.Fatal("a replay has no resume token")
	}
	close(w.gate)
	for _, res := range []*http.Response{first, replay} {
		if got := checkAnswer(t, readAll(t, res), 3); got != words(3) {
			t.Fatalf("answer %q", got)
		}
	}
	// Finished: the same again.
	again := post("k1", keyAcme, "hi", true)
	if got := again.Header.Get("X-Relay-Stream-Id"); got != id || checkAnswer(t, readAll(t, again), 3) != words(3) {
		t.Fatalf("replay of a finished stream got %q", got)
	}
	// Another body: 409, nothing started.
	conflict := post("k1", keyAcme, "something else", true)
	if got := decodeError(t, conflict); conflict.StatusCode != http.StatusConflict || got.Code != CodeIdempotencyKeyReused || conflict.Header.Get("X-Relay-Stream-Id") != "" {
		t.Fatalf("another body: %d %+v", conflict.StatusCode, got)
	}
	// Keys are the tenant's own: beta's k1 is another key.
	beta := post("k1", keyBeta, "hi", false)
	if beta.StatusCode != http.StatusNotFound { // beta may not use testModel: refused before the key is looked at
		t.Fatalf("beta: %d", beta.StatusCode)
	}
	betaBody := `{"model":"` + otherModel + `","messages":[{"role":"user","content":"hi"}]}`
	h := bearerHeader(keyBeta)
	h.Set(HeaderIdempotencyKey, "k1")
	if res := do(t, "POST", edge.url+"/v1/chat/completions", betaBody, h); res.StatusCode != http.StatusOK || res.Header.Get("X-Relay-Stream-Id") == id {
		t.Fatalf("beta's k1: %d %s", res.StatusCode, res.Header.Get("X-Relay-Stream-Id"))
	}
	// X-Request-Id is a key too.
	h = bearerHeader(keyAcme)
	h.Set(HeaderRequestID, "req-1")
	a := do(t, "POST", edge.url+"/v1/chat/completions", chatBody(false, "x"), h)
	b := do(t, "POST", edge.url+"/v1/chat/completions", chatBody(false, "x"), h)
	if a.Header.Get("X-Relay-Stream-Id") != b.Header.Get("X-Relay-Stream-Id") || b.Header.Get(HeaderIdempotentReplayed) != "true" {
		t.Fatal("X-Request-Id did not attach")
	}
	// After the window the key starts anew.
	clock.advance(DefaultIdempotencyWindow + time.Minute)
	late := post("k1", keyAcme, "other body, new window", false)
	if got := late.Header.Get("X-Relay-Stream-Id"); late.StatusCode != http.StatusOK || got == id || late.Header.Get(HeaderIdempotentReplayed) != "" {
		t.Fatalf("after the window: %d, stream %q", late.StatusCode, got)
	}
	// A bad key is refused.
	h = bearerHeader(keyAcme)
	h.Set(HeaderIdempotencyKey, "naïve")
	if res := do(t, "POST", edge.url+"/v1/chat/completions", chatBody(false, "x"), h); res.StatusCode != http.StatusBadRequest {
		t.Fatalf("non-ASCII key: %d", res.StatusCode)
	}
	// Four generations in all: k1 (acme), k1 (beta), req-1, k1 anew.
	waitFor(t, func() bool { return len(w.reqs) == 4 })
	time.Sleep(50 * time.Millisecond)
	if len(w.reqs) != 4 {
		t.Fatalf("%d generations", len(w.reqs))
	}
}

// Identical requests racing, on two edges, start one generation.
func TestIdempotencyRace(t *testing.T) {
	e := newEnv(t)
	w := e.startWorker(&worker{script: answer(2)})
	edges := []*testEdge{e.startEdge(tenantConfig()), e.startEdge(tenantConfig())}
	const n = 16
	ids := make([]string, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			h := bearerHeader(keyAcme)
			h.Set(HeaderIdempotencyKey, "race")
			<-start
			res := do(t, "POST", edges[i%2].url+"/v1/chat/completions", chatBody(false, "race"), h)
			if res.StatusCode != http.StatusOK {
				t.Errorf("request %d: %d %s", i, res.StatusCode, readAll(t, res))
				return
			}
			ids[i] = res.Header.Get("X-Relay-Stream-Id")
		})
	}
	close(start)
	wg.Wait()
	for i := range ids {
		if ids[i] != ids[0] || !wire.ValidStreamID(ids[i]) {
			t.Fatalf("streams %v", ids)
		}
	}
	time.Sleep(100 * time.Millisecond)
	if len(w.reqs) != 1 {
		t.Fatalf("%d generations", len(w.reqs))
	}
}

// Over WebSocket, idempotency_key does what the header does.
func TestIdempotencyOverWebSocket(t *testing.T) {
	e := newEnv(t)
	w := e.startWorker(&worker{script: answer(2)})
	edge := e.startEdge(tenantConfig())
	var ids []string
	for i := range 2 {
		conn, _, err := dialWSWith(t, edge, bearerHeader(keyAcme))
		if err != nil {
			t.Fatal(err)
		}
		sendWS(t, conn, `{"type":"start","idempotency_key":"ws-1","request":`+chatBody(true, "ws")+`}`)
		var started struct {
			Type     string `json:"type"`
			StreamID string `json:"stream_id"`
			Replayed bool   `json:"replayed"`
		}
		if err := conn.ReadJSON(&started); err != nil || started.Type != "started" || started.Replayed != (i == 1) {
			t.Fatalf("start %d: %+v, %v", i, started, err)
		}
		ids = append(ids, started.StreamID)
		if msgs := readStream(t, conn); msgs[len(msgs)-1].Type != "end" {
			t.Fatalf("start %d ended with %+v", i, msgs[len(msgs)-1])
		}
	}
	if ids[0] != ids[1] || len(w.reqs) != 1 {
		t.Fatalf("streams %v, %d generations", ids, len(w.reqs))
	}
}
