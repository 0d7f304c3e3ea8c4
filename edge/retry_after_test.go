package edge

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/relaydev/relay/relay/wire"
)

// Every 503 the edge sends says when to come back with Retry-After, as
// clients and SDKs that retry a 503 read it: a NATS call that failed,
// /readyz, a stream that ended with a 503 without a hint of its own, and
// any other 503 error (an open breaker with no wait left, an idempotency
// key still being accepted). The draining edge's 503 is drain_test's.
func TestEvery503CarriesRetryAfter(t *testing.T) {
	t.Run("NATS unreachable", func(t *testing.T) {
		e := newEnv(t)
		edge := e.startEdge(Config{})
		edge.nc.Close() // every NATS call of this edge fails at once
		id := wire.NewStreamID()
		for _, r := range []struct{ method, path, body string }{
			{"POST", "/v1/chat/completions", chatBody(true, "hi")},
			{"POST", "/v1/chat/completions", chatBody(false, "hi")},
			{"GET", "/v1/streams/" + id, ""},
			{"DELETE", "/v1/streams/" + id, ""},
			{"GET", "/v1/relay/status", ""},
			{"GET", "/readyz", ""},
		} {
			res := do(t, r.method, edge.url+r.path, r.body, nil)
			body := readAll(t, res)
			if res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") != "1" {
				t.Errorf("%s %s: %d, Retry-After %q: %s", r.method, r.path, res.StatusCode, res.Header.Get("Retry-After"), body)
			}
		}
	})
	t.Run("stream ended with a 503", func(t *testing.T) {
		e := newEnv(t)
		e.startWorker(&worker{script: failing(wire.StatusFailed, &wire.Error{Message: "no provider can take it", Type: wire.TypeUpstream, Status: 503})})
		edge := e.startEdge(Config{})
		res := do(t, "POST", edge.url+"/v1/chat/completions", chatBody(false, "hi"), nil)
		body := readAll(t, res)
		if res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") != "1" {
			t.Errorf("%d, Retry-After %q: %s", res.StatusCode, res.Header.Get("Retry-After"), body)
		}
	})
	t.Run("any 503 error", func(t *testing.T) {
		for _, tc := range []struct {
			err  *wire.Error
			want string
		}{
			{&wire.Error{Message: "every breaker open", Type: wire.TypeUpstream, Status: 503}, "1"},
			{&wire.Error{Message: "every breaker open", Type: wire.TypeUpstream, Status: 503, RetryAfterMS: 2500}, "3"},
			{&wire.Error{Message: "key in use", Type: wire.TypeServer, Code: CodeIdempotencyKeyInUse, Status: 503}, "1"},
			{&wire.Error{Message: "not found", Type: wire.TypeNotFound, Status: 404}, ""},
		} {
			rec := httptest.NewRecorder()
			writeError(rec, tc.err)
			if got := rec.Header().Get("Retry-After"); got != tc.want {
				t.Errorf("%d %q: Retry-After %q, want %q", tc.err.Status, tc.err.Message, got, tc.want)
			}
		}
	})
}
