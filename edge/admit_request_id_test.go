package edge

import (
	"net/http"
	"strings"
	"testing"
)

// TestRequestIDReachesTheQueue: the client's X-Request-Id travels with its
// request to the worker, which passes it to the provider. One that is not
// a valid key is refused as the request's key (start_idempotency.go), or, when
// an Idempotency-Key is the key, left out while the request runs.
func TestRequestIDReachesTheQueue(t *testing.T) {
	e := newEnv(t)
	w := e.startWorker(&worker{script: answer(1)})
	edge := e.startEdge(Config{})
	for _, tc := range []struct {
		header http.Header
		want   string
	}{
		{http.Header{"X-Request-Id": {"req-7f3a"}}, "req-7f3a"},
		{http.Header{}, ""},
		{http.Header{"X-Request-Id": {strings.Repeat("\u00e9", 3)}, "Idempotency-Key": {"k-1"}}, ""},
	} {
		res := do(t, http.MethodPost, edge.url+"/v1/chat/completions", chatBody(false, "hi"), tc.header)
		if res.StatusCode != http.StatusOK {
			t.Fatalf("headers %v: %d %s", tc.header, res.StatusCode, readAll(t, res))
		}
		if req := <-w.reqs; req.RequestID != tc.want {
			t.Errorf("headers %v: queued request id %q, want %q", tc.header, req.RequestID, tc.want)
		}
	}
}
