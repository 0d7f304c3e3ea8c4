package edge

import (
	"bufio"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/relaydev/relay/relay/wire"
)

// refusing is a worker's script for a provider that refuses the request
// before any token: only a failed end frame with the provider's error.
func refusing(status int) script {
	return func(wire.Request) []wire.Frame {
		return []wire.Frame{{Kind: wire.KindEnd, Status: wire.StatusFailed, Attempts: 1,
			Error: &wire.Error{Message: "bad request", Type: wire.TypeInvalidRequest, Code: "invalid_value", Status: status}}}
	}
}

// TestChatRefusalIsAnHTTPError: a streamed chat completion that the
// provider refuses before any token is answered with the provider's status
// and OpenAI error body, and the stream id, not a 200 and an error event.
func TestChatRefusalIsAnHTTPError(t *testing.T) {
	for _, status := range []int{http.StatusBadRequest, http.StatusNotFound, http.StatusRequestEntityTooLarge, http.StatusUnprocessableEntity} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			e := newEnv(t)
			e.startWorker(&worker{script: refusing(status)})
			edge := e.startEdge(Config{})
			res := do(t, "POST", edge.url+"/v1/chat/completions", chatBody(true, "hi"), nil)
			got := decodeError(t, res)
			if res.StatusCode != status || res.Header.Get("Content-Type") != "application/json" ||
				got.Type != wire.TypeInvalidRequest || got.Code != "invalid_value" || got.Message != "bad request" ||
				!wire.ValidStreamID(res.Header.Get("X-Relay-Stream-Id")) {
				t.Fatalf("%d %s %+v, stream id %q", res.StatusCode, res.Header.Get("Content-Type"), got, res.Header.Get("X-Relay-Stream-Id"))
			}
		})
	}
}

// TestChatFailureBeforeAnyTokenIsAnEvent: a failure that is no refusal
// (here the provider down, 503) stays a 200 and an error event, which an
// SDK does not retry on its own.
func TestChatFailureBeforeAnyTokenIsAnEvent(t *testing.T) {
	e := newEnv(t)
	e.startWorker(&worker{script: refusing(http.StatusServiceUnavailable)})
	edge := e.startEdge(Config{})
	res := do(t, "POST", edge.url+"/v1/chat/completions", chatBody(true, "hi"), nil)
	events := frameEvents(parseSSE(t, readAll(t, res)))
	if res.StatusCode != http.StatusOK || len(events) != 1 || decodeChunk(t, events[0].Data).Error == nil {
		t.Fatalf("%d, events %+v", res.StatusCode, events)
	}
	awaitRunnersGone(t, edge)
}

// TestChatRefusalRetryWithIdempotencyKey: a client that dropped before the
// head learned no stream id; its retry with the same Idempotency-Key
// attaches to the stream (no second generation) and gets the refusal.
func TestChatRefusalRetryWithIdempotencyKey(t *testing.T) {
	e := newEnv(t)
	gate := make(chan struct{})
	w := e.startWorker(&worker{script: refusing(http.StatusBadRequest), gate: gate})
	edge := e.startEdge(Config{})
	key := http.Header{HeaderIdempotencyKey: {"refused-once"}}

	// The first client gives up while the request is queued: no head yet.
	ctxReq, err := http.NewRequest("POST", edge.url+"/v1/chat/completions", strings.NewReader(chatBody(true, "hi")))
	if err != nil {
		t.Fatal(err)
	}
	ctxReq.Header = key.Clone()
	ctxReq.Header.Set("Content-Type", "application/json")
	client := &http.Client{Timeout: 100 * time.Millisecond}
	if res, err := client.Do(ctxReq); err == nil {
		res.Body.Close()
		t.Fatalf("a head (%d) came before the first frame", res.StatusCode)
	}
	first := <-w.reqs
	close(gate)

	res := do(t, "POST", edge.url+"/v1/chat/completions", chatBody(true, "hi"), key)
	got := decodeError(t, res)
	if res.StatusCode != http.StatusBadRequest || got.Code != "invalid_value" ||
		res.Header.Get("X-Relay-Stream-Id") != first.StreamID || res.Header.Get(HeaderIdempotentReplayed) != "true" {
		t.Fatalf("retry: %d %+v, stream %q (first %q), replayed %q", res.StatusCode, got,
			res.Header.Get("X-Relay-Stream-Id"), first.StreamID, res.Header.Get(HeaderIdempotentReplayed))
	}
	select {
	case req := <-w.reqs:
		t.Fatalf("the retry queued a second generation %s", req.StreamID)
	default:
	}
}

// TestChatHeadWaitsOneKeepalive: a request still queued after one
// keepalive interval gets its head (and the stream id) then, so that a
// proxy does not cut a silent connection; the answer follows on it.
func TestChatHeadWaitsOneKeepalive(t *testing.T) {
	e := newEnv(t)
	w := e.startWorker(&worker{script: answer(2), gate: make(chan struct{})})
	edge := e.startEdge(Config{Keepalive: 20 * time.Millisecond})
	res := do(t, "POST", edge.url+"/v1/chat/completions", chatBody(true, "hi"), nil)
	if res.StatusCode != http.StatusOK || !wire.ValidStreamID(res.Header.Get("X-Relay-Stream-Id")) {
		t.Fatalf("head %d, stream id %q", res.StatusCode, res.Header.Get("X-Relay-Stream-Id"))
	}
	close(w.gate) // the head came while the worker held every frame
	if got := checkAnswer(t, readAll(t, res), 2); got != words(2) {
		t.Fatalf("text %q", got)
	}
	awaitRunnersGone(t, edge)
}

// TestChatFirstTokenTiming measures what holding the head costs: the
// median time from a streamed POST to its response head and to its first
// chunk, with a worker that appends at once. The first token goes out with
// the head, so the two are close; the log line is the measure.
func TestChatFirstTokenTiming(t *testing.T) {
	e := newEnv(t)
	e.startWorker(&worker{script: answer(1)})
	edge := e.startEdge(Config{})
	const runs = 40
	var heads, firsts []time.Duration
	for range runs {
		t0 := time.Now()
		res := do(t, "POST", edge.url+"/v1/chat/completions", chatBody(true, "hi"), nil)
		head := time.Since(t0)
		events := readEvents(t, bufio.NewReader(res.Body), func(ev sseEvent) bool { return ev.ID != "" })
		first := time.Since(t0)
		res.Body.Close()
		if c := decodeChunk(t, events[len(events)-1].Data).Choices[0].Delta.Content; res.StatusCode != http.StatusOK || c == nil || *c != "w1 " {
			t.Fatalf("%d, first event %+v", res.StatusCode, events)
		}
		heads, firsts = append(heads, head), append(firsts, first)
	}
	slices.Sort(heads)
	slices.Sort(firsts)
	t.Logf("median over %d streams: head %v, first token %v", runs, heads[runs/2], firsts[runs/2])
	awaitRunnersGone(t, edge)
}
