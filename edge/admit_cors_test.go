package edge

import (
	"net/http"
	"strings"
	"testing"
)

func TestCORS(t *testing.T) {
	e := newEnv(t)
	e.startWorker(&worker{script: answer(1)})
	cfg := tenantConfig()
	cfg.CORSAllowedOrigins = []string{"https://app.example", "http://localhost:3000"}
	edge := e.startEdge(cfg)

	// A preflight needs no key.
	preflight := http.Header{
		"Origin":                         {"https://app.example"},
		"Access-Control-Request-Method":  {"POST"},
		"Access-Control-Request-Headers": {"authorization, content-type, idempotency-key, x-stainless-os"},
	}
	res := do(t, "OPTIONS", edge.url+"/v1/chat/completions", "", preflight)
	h := res.Header
	if res.StatusCode != http.StatusNoContent || h.Get("Access-Control-Allow-Origin") != "https://app.example" ||
		!strings.Contains(h.Get("Access-Control-Allow-Methods"), "POST") || !strings.Contains(h.Get("Access-Control-Allow-Methods"), "DELETE") ||
		!strings.Contains(h.Get("Access-Control-Allow-Headers"), "authorization") || !strings.Contains(h.Get("Access-Control-Allow-Headers"), "idempotency-key") ||
		h.Get("Access-Control-Max-Age") == "" || !strings.Contains(strings.Join(h.Values("Vary"), ","), "Origin") {
		t.Fatalf("preflight: %d %v", res.StatusCode, h)
	}
	if h.Get("Access-Control-Allow-Credentials") != "" {
		t.Fatal("credentials allowed")
	}
	preflight.Set("Origin", "https://evil.example")
	res = do(t, "OPTIONS", edge.url+"/v1/chat/completions", "", preflight)
	if got := decodeError(t, res); res.StatusCode != http.StatusForbidden || got.Code != CodeOriginNotAllowed || res.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("preflight from another origin: %d %+v", res.StatusCode, got)
	}

	// The real request exposes the relay's headers to the page, errors
	// included (a 401 must be readable).
	hdr := bearerHeader(keyAcme)
	hdr.Set("Origin", "http://localhost:3000")
	res = do(t, "POST", edge.url+"/v1/chat/completions", chatBody(true, "hi"), hdr)
	exposed := res.Header.Get("Access-Control-Expose-Headers")
	if res.StatusCode != http.StatusOK || res.Header.Get("Access-Control-Allow-Origin") != "http://localhost:3000" ||
		!strings.Contains(exposed, "X-Relay-Stream-Id") || !strings.Contains(exposed, HeaderResumeToken) {
		t.Fatalf("POST from an allowed origin: %d %v", res.StatusCode, res.Header)
	}
	res = do(t, "GET", edge.url+"/v1/models", "", http.Header{"Origin": {"https://app.example"}})
	if res.StatusCode != http.StatusUnauthorized || res.Header.Get("Access-Control-Allow-Origin") != "https://app.example" {
		t.Fatalf("401 to an allowed origin: %d %v", res.StatusCode, res.Header)
	}
	res = do(t, "GET", edge.url+"/v1/models", "", http.Header{"Origin": {"https://evil.example"}, "Authorization": {"Bearer " + keyAcme}})
	if res.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatal("another origin got CORS headers")
	}

	// WebSockets: the same origins, the edge's own, and non-browsers.
	for origin, ok := range map[string]bool{
		"https://app.example":  true,
		"https://evil.example": false,
		edge.url:               true,
		"":                     true,
	} {
		h := bearerHeader(keyAcme)
		if origin != "" {
			h.Set("Origin", origin)
		}
		_, res, err := dialWSWith(t, edge, h)
		if (err == nil) != ok {
			t.Errorf("WebSocket from %q: %v", origin, err)
		}
		if !ok && (res == nil || res.StatusCode != http.StatusForbidden) {
			t.Errorf("WebSocket from %q: %v", origin, res)
		}
	}
}

func TestCORSAnyOrigin(t *testing.T) {
	c := newCORSPolicy([]string{"*"})
	if !c.allowed("https://anything.example") || c.allowed("") {
		t.Fatal("*")
	}
	c = newCORSPolicy([]string{"HTTPS://App.Example/"})
	if !c.allowed("https://app.example") || c.allowed("https://app.example:444") {
		t.Fatal("normalised origins")
	}
}

// The SSE headers that keep proxies from buffering or transforming the
// stream, and the reconnection hint, on a new stream and a resumed one.
func TestSSEHeadersForProxies(t *testing.T) {
	e := newEnv(t)
	e.startWorker(&worker{script: answer(1)})
	edge := e.startEdge(Config{RetryHint: 1500 * 1e6})
	res := do(t, "POST", edge.url+"/v1/chat/completions", chatBody(true, "hi"), nil)
	id := res.Header.Get("X-Relay-Stream-Id")
	for name, res := range map[string]*http.Response{
		"POST": res,
		"GET":  do(t, "GET", edge.url+"/v1/streams/"+id, "", nil),
	} {
		h := res.Header
		if h.Get("Content-Type") != "text/event-stream" || h.Get("Cache-Control") != "no-cache, no-transform" || h.Get("X-Accel-Buffering") != "no" {
			t.Errorf("%s headers %v", name, h)
		}
		if body := readAll(t, res); !strings.HasPrefix(body, "retry: 1500\n\n") {
			t.Errorf("%s body starts %q", name, body[:min(len(body), 40)])
		}
	}
}
