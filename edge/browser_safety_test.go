package edge

import (
	"net/http"
	"strings"
	"testing"

	"github.com/gorilla/websocket"

	"github.com/relaydev/relay/relay/wire"
)

// A request body must be declared JSON: what a cross-site form or a
// no-cors fetch can send without a preflight is refused with a 415 before
// anything is queued.
func TestBrowserSafetyPostNeedsJSON(t *testing.T) {
	e := newEnv(t)
	w := e.startWorker(&worker{script: answer(1)})
	edge := e.startEdge(Config{})
	for _, path := range []string{"/v1/chat/completions", "/v1/responses"} {
		body := chatBody(false, "hi")
		if path == "/v1/responses" {
			body = responsesBody("")
		}
		for _, ct := range []string{"text/plain;charset=UTF-8", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", ""} {
			res := do(t, http.MethodPost, edge.url+path, body, http.Header{"Content-Type": {ct}})
			var got struct{ Error wire.Error }
			if err := jsonDecode(res, &got); err != nil || res.StatusCode != http.StatusUnsupportedMediaType ||
				got.Error.Code != CodeUnsupportedMediaType || !strings.Contains(got.Error.Message, "application/json") {
				t.Errorf("%s with Content-Type %q: %d %+v %v", path, ct, res.StatusCode, got, err)
			}
		}
	}
	select {
	case req := <-w.reqs:
		t.Fatalf("a refused request was queued: %s", req.StreamID)
	default:
	}
	for _, ct := range []string{"application/json", "application/json; charset=utf-8", "Application/JSON"} {
		res := do(t, http.MethodPost, edge.url+"/v1/chat/completions", chatBody(false, "hi"), http.Header{"Content-Type": {ct}})
		if res.StatusCode != http.StatusOK {
			t.Errorf("Content-Type %q: %d %s", ct, res.StatusCode, readAll(t, res))
		}
	}
	// A credential header takes a preflight in any browser: such a
	// request is read as JSON whatever its label (curl -d sends a form
	// type), as a provider reads it.
	for _, h := range []http.Header{
		{"Content-Type": {"application/x-www-form-urlencoded"}, "Authorization": {"Bearer anything"}},
		{"Content-Type": {"text/plain"}, "X-Api-Key": {"anything"}},
	} {
		res := do(t, http.MethodPost, edge.url+"/v1/chat/completions", chatBody(false, "hi"), h)
		if res.StatusCode != http.StatusOK {
			t.Errorf("with a credential header, %v: %d %s", h, res.StatusCode, readAll(t, res))
		}
	}
}

// An anonymous edge answers only host names it knows, so a page that
// rebinds its own name to the edge's address reads nothing.
func TestBrowserSafetyAnonymousHostCheck(t *testing.T) {
	e := newEnv(t)
	edge := e.startEdge(Config{AllowedHosts: []string{"relay.internal", "*.relay.example"}})
	for host, want := range map[string]int{
		"evil.example":           http.StatusForbidden,
		"evil.example:8080":      http.StatusForbidden,
		"localhost.evil.example": http.StatusForbidden,
		"127.0.0.1:8080":         http.StatusOK,
		"[::1]:8080":             http.StatusOK,
		"localhost:8080":         http.StatusOK,
		"app.localhost":          http.StatusOK,
		"relay.internal:8080":    http.StatusOK,
		"RELAY.internal.":        http.StatusOK,
		"a.relay.example":        http.StatusOK,
	} {
		req, err := http.NewRequest(http.MethodGet, edge.url+"/v1/models", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var got struct{ Error wire.Error }
		if res.StatusCode != want {
			t.Errorf("Host %q: %d, want %d", host, res.StatusCode, want)
		} else if want == http.StatusForbidden && (jsonDecode(res, &got) != nil || got.Error.Code != CodeHostNotAllowed) {
			t.Errorf("Host %q: %+v", host, got)
		}
		res.Body.Close()
	}
	// A WebSocket, too; health probes answer any Host.
	if _, res, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(edge.url, "http")+"/v1/ws", http.Header{"Host": {"evil.example"}}); err == nil || res == nil || res.StatusCode != http.StatusForbidden {
		t.Errorf("WebSocket under a foreign Host: %v %v", res, err)
	}
	req, _ := http.NewRequest(http.MethodGet, edge.url+"/healthz", nil)
	req.Host = "relay-edge-7f9c"
	if res, err := http.DefaultClient.Do(req); err != nil || res.StatusCode != http.StatusOK {
		t.Errorf("/healthz under a pod name: %v %v", res, err)
	} else {
		res.Body.Close()
	}

	for _, bad := range []string{"relay:8080", "http://relay", "*.", "a*b"} {
		if err := (Config{AllowedHosts: []string{bad}}).Validate("edge"); err == nil || !strings.Contains(err.Error(), "edge.allowed_hosts[0]") {
			t.Errorf("allowed host %q: %v", bad, err)
		}
	}

	// With API keys (and no anonymous access) a page has nothing to send:
	// no check.
	keyed := e.startEdge(tenantConfig())
	req, _ = http.NewRequest(http.MethodGet, keyed.url+"/v1/models", nil)
	req.Host = "evil.example"
	req.Header.Set("Authorization", "Bearer "+keyAcme)
	if res, err := http.DefaultClient.Do(req); err != nil || res.StatusCode != http.StatusOK {
		t.Errorf("keyed edge: %v %v", res, err)
	} else {
		res.Body.Close()
	}
}
