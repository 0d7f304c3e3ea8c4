package edge

import (
	"net/http"
	"testing"
)

// TestSDKRetryAttaches: an SDK's retry (X-Stainless-Retry-Count above 0)
// of a request is served the stream its first attempt started, while two
// first attempts with the same body are two generations.
func TestSDKRetryAttaches(t *testing.T) {
	e := newEnv(t)
	w := e.startWorker(&worker{script: answer(3)})
	edge := e.startEdge(Config{})
	attempt := func(n string) *http.Response {
		res := do(t, "POST", edge.url+"/v1/chat/completions", chatBody(false, "hi"), http.Header{HeaderSDKRetryCount: {n}})
		readAll(t, res)
		return res
	}
	first, again := attempt("0"), attempt("0")
	retry := attempt("1")
	id := first.Header.Get("X-Relay-Stream-Id")
	if again.Header.Get("X-Relay-Stream-Id") == id {
		t.Fatalf("two first attempts shared stream %s", id)
	}
	if got := retry.Header.Get("X-Relay-Stream-Id"); retry.StatusCode != http.StatusOK || got != again.Header.Get("X-Relay-Stream-Id") ||
		retry.Header.Get(HeaderIdempotentReplayed) != "true" {
		t.Fatalf("retry: %d, stream %q, replayed %q; want the latest first attempt's %q", retry.StatusCode, got,
			retry.Header.Get(HeaderIdempotentReplayed), again.Header.Get("X-Relay-Stream-Id"))
	}
	if n := len(w.reqs); n != 2 {
		t.Fatalf("%d generations queued, want 2", n)
	}
}
