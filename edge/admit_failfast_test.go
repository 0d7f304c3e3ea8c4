package edge

import (
	"net/http"
	"testing"

	"github.com/relaydev/relay/relay/wire"
)

// A generation waits for its provider unless it asks to fail fast: the
// X-Relay-Fail-Fast header, or its key's fail_fast, which the header
// overrides either way, reaches the worker in the queued request. A
// header that is not a boolean is a 400 naming it.
func TestFailFastReachesTheWorker(t *testing.T) {
	e := newEnv(t)
	w := e.startWorker(&worker{script: answer(1)})
	edge := e.startEdge(Config{APIKeys: []APIKey{
		{Tenant: "waits", KeySHA256: keyHash("key-waits")},
		{Tenant: "hurries", KeySHA256: keyHash("key-hurries"), FailFast: true},
	}})
	for _, tc := range []struct {
		key, header string
		want        bool
	}{
		{"key-waits", "", false},
		{"key-waits", "true", true},
		{"key-hurries", "", true},
		{"key-hurries", "false", false},
	} {
		h := http.Header{"Authorization": {"Bearer " + tc.key}}
		if tc.header != "" {
			h.Set(HeaderFailFast, tc.header)
		}
		res := do(t, "POST", edge.url+"/v1/chat/completions", chatBody(false, "hi"), h)
		if body := readAll(t, res); res.StatusCode != http.StatusOK {
			t.Fatalf("%s with %q: %d %s", tc.key, tc.header, res.StatusCode, body)
		}
		if req := <-w.reqs; req.FailFast != tc.want {
			t.Errorf("%s with header %q: queued with fail_fast %v, want %v", tc.key, tc.header, req.FailFast, tc.want)
		}
	}

	res := do(t, "POST", edge.url+"/v1/chat/completions", chatBody(false, "hi"),
		http.Header{"Authorization": {"Bearer key-waits"}, HeaderFailFast: {"soon"}})
	if got := decodeError(t, res); res.StatusCode != http.StatusBadRequest || got.Param != HeaderFailFast || got.Type != wire.TypeInvalidRequest {
		t.Fatalf("header %q: %d %+v, want a 400 naming the header", "soon", res.StatusCode, got)
	}
}
