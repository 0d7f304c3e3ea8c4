package edge

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/relaydev/relay/relay/wire"
)

// fakeForwarder is a worker on wire.ForwardSubject whose answer to the
// n-th request (from 1) is script(n).
type fakeForwarder struct {
	t     *testing.T
	nc    *nats.Conn
	calls atomic.Int32
}

// forwardStep is one reply message of a script.
type forwardStep struct {
	kind wire.ForwardKind
	data any // marshalled, unless []byte or string
	seq  int // -1: the next number
}

func (e *env) fakeForwarder(script func(n int, req wire.ForwardRequest) []forwardStep) *fakeForwarder {
	e.t.Helper()
	f := &fakeForwarder{t: e.t, nc: e.nc}
	sub, err := e.nc.QueueSubscribe(wire.ForwardSubject, wire.ForwardQueue, func(msg *nats.Msg) {
		n := int(f.calls.Add(1))
		var req wire.ForwardRequest
		if err := json.Unmarshal(msg.Data, &req); err != nil {
			e.t.Errorf("forwarded request: %v", err)
			return
		}
		for i, s := range script(n, req) {
			var data []byte
			switch d := s.data.(type) {
			case nil:
			case []byte:
				data = d
			case string:
				data = []byte(d)
			default:
				data, _ = json.Marshal(d)
			}
			seq := i
			if s.seq >= 0 {
				seq = s.seq
			}
			out := &nats.Msg{Subject: msg.Reply, Data: data, Header: nats.Header{}}
			out.Header.Set(wire.HeaderForwardKind, string(s.kind))
			out.Header.Set(wire.HeaderForwardSeq, strconv.Itoa(seq))
			if err := e.nc.PublishMsg(out); err != nil {
				e.t.Errorf("reply: %v", err)
			}
		}
	})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := e.nc.Flush(); err != nil {
		e.t.Fatal(err)
	}
	return f
}

func step(kind wire.ForwardKind, data any) forwardStep {
	return forwardStep{kind: kind, data: data, seq: -1}
}

// answered is a whole non-streamed answer: body in two pieces.
func answered(body string) []forwardStep {
	half := len(body) / 2
	return []forwardStep{
		step(wire.ForwardAccepted, nil),
		step(wire.ForwardHeadKind, wire.ForwardHead{Status: 200, ContentType: "application/json", Size: len(body)}),
		step(wire.ForwardBody, body[:half]),
		step(wire.ForwardBody, body[half:]),
		step(wire.ForwardEndKind, wire.ForwardEnd{}),
	}
}

const embeddingsBody = `{"model":"gpt-test","input":"hi"}`

func TestForwardJoinsThePiecesOfAnAnswer(t *testing.T) {
	e := newEnv(t)
	edge := e.startEdge(Config{})
	const body = `{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.5,0.25]}]}`
	reqs := make(chan wire.ForwardRequest, 1)
	e.fakeForwarder(func(_ int, req wire.ForwardRequest) []forwardStep {
		reqs <- req
		return answered(body)
	})
	res := do(t, http.MethodPost, edge.url+"/v1/embeddings", embeddingsBody, http.Header{HeaderFailFast: {"true"}})
	if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("status %d, content type %q", res.StatusCode, res.Header.Get("Content-Type"))
	}
	if b := readAll(t, res); b != body {
		t.Fatalf("body %q, want %q", b, body)
	}
	if got := <-reqs; got.Endpoint != wire.EndpointEmbeddings || got.Model != testModel || !got.FailFast || string(got.Body) != embeddingsBody || got.ID == "" {
		t.Fatalf("forwarded %+v", got)
	}
}

func TestForwardRetriesAnotherWorkerWhenOneGoesSilent(t *testing.T) {
	e := newEnv(t)
	edge := e.startEdge(Config{})
	edge.forwardSilence = 200 * time.Millisecond
	f := e.fakeForwarder(func(n int, _ wire.ForwardRequest) []forwardStep {
		if n == 1 {
			// Took the request and died.
			return []forwardStep{step(wire.ForwardAccepted, nil)}
		}
		return answered(`{"ok":true}`)
	})
	res := do(t, http.MethodPost, edge.url+"/v1/embeddings", embeddingsBody, nil)
	if b := readAll(t, res); res.StatusCode != http.StatusOK || b != `{"ok":true}` {
		t.Fatalf("status %d, body %q", res.StatusCode, b)
	}
	if n := f.calls.Load(); n != 2 {
		t.Fatalf("%d workers were asked, want 2", n)
	}
}

func TestForwardRetriesWhenAWorkerStoppedOrIsFull(t *testing.T) {
	e := newEnv(t)
	edge := e.startEdge(Config{})
	f := e.fakeForwarder(func(n int, _ wire.ForwardRequest) []forwardStep {
		if n == 1 {
			return []forwardStep{step(wire.ForwardEndKind, wire.ForwardEnd{Retryable: true, Error: &wire.Error{Message: "busy", Status: 503}})}
		}
		return answered(`{"ok":true}`)
	})
	res := do(t, http.MethodPost, edge.url+"/v1/embeddings", embeddingsBody, nil)
	if b := readAll(t, res); res.StatusCode != http.StatusOK || b != `{"ok":true}` || f.calls.Load() != 2 {
		t.Fatalf("status %d, body %q after %d tries", res.StatusCode, b, f.calls.Load())
	}
}

func TestForwardPassesTheProviderErrorOn(t *testing.T) {
	e := newEnv(t)
	edge := e.startEdge(Config{})
	e.fakeForwarder(func(int, wire.ForwardRequest) []forwardStep {
		return []forwardStep{
			step(wire.ForwardAccepted, nil),
			step(wire.ForwardEndKind, wire.ForwardEnd{Error: &wire.Error{Message: "bad input", Type: wire.TypeInvalidRequest, Param: "input", Status: 400}}),
		}
	})
	res := do(t, http.MethodPost, edge.url+"/v1/completions", `{"model":"gpt-test","prompt":"x","stream":true}`, nil)
	b := readAll(t, res)
	if res.StatusCode != http.StatusBadRequest || !strings.Contains(b, `"message":"bad input"`) || !strings.Contains(b, `"param":"input"`) {
		t.Fatalf("status %d, body %s", res.StatusCode, b)
	}
}

func TestForwardStreamsEventsAndEndsWithDone(t *testing.T) {
	e := newEnv(t)
	edge := e.startEdge(Config{})
	e.fakeForwarder(func(int, wire.ForwardRequest) []forwardStep {
		return []forwardStep{
			step(wire.ForwardAccepted, nil),
			step(wire.ForwardAlive, nil),
			step(wire.ForwardHeadKind, wire.ForwardHead{Status: 200}),
			step(wire.ForwardEvent, `{"choices":[{"text":"a"}]}`),
			step(wire.ForwardEvent, `{"choices":[{"text":"b"}]}`),
			step(wire.ForwardEndKind, wire.ForwardEnd{}),
		}
	})
	res := do(t, http.MethodPost, edge.url+"/v1/completions", `{"model":"gpt-test","prompt":"x","stream":true}`, nil)
	b := readAll(t, res)
	want := "data: {\"choices\":[{\"text\":\"a\"}]}\n\ndata: {\"choices\":[{\"text\":\"b\"}]}\n\ndata: [DONE]\n\n"
	if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "text/event-stream" || b != want {
		t.Fatalf("status %d, body %q", res.StatusCode, b)
	}
}

func TestForwardEndsAStreamWhoseWorkerIsLostWithAnError(t *testing.T) {
	e := newEnv(t)
	edge := e.startEdge(Config{})
	edge.forwardSilence = 200 * time.Millisecond
	f := e.fakeForwarder(func(int, wire.ForwardRequest) []forwardStep {
		return []forwardStep{
			step(wire.ForwardAccepted, nil),
			step(wire.ForwardHeadKind, wire.ForwardHead{Status: 200}),
			step(wire.ForwardEvent, `{"choices":[{"text":"a"}]}`),
		}
	})
	res := do(t, http.MethodPost, edge.url+"/v1/completions", `{"model":"gpt-test","prompt":"x","stream":true}`, nil)
	b := readAll(t, res)
	if res.StatusCode != http.StatusOK || !strings.Contains(b, wire.CodeWorkerLost) || strings.Contains(b, "[DONE]") {
		t.Fatalf("status %d, body %q: want the event, then an error and no [DONE]", res.StatusCode, b)
	}
	if n := f.calls.Load(); n != 1 {
		t.Fatalf("%d workers were asked: the client had part of the answer, so none after the first", n)
	}
}

func TestForwardTreatsAGapAsALostWorker(t *testing.T) {
	e := newEnv(t)
	edge := e.startEdge(Config{})
	e.fakeForwarder(func(n int, _ wire.ForwardRequest) []forwardStep {
		if n == 1 {
			// Message 1 was dropped.
			return []forwardStep{step(wire.ForwardAccepted, nil), {kind: wire.ForwardEndKind, data: wire.ForwardEnd{}, seq: 2}}
		}
		return answered(`{"ok":true}`)
	})
	res := do(t, http.MethodPost, edge.url+"/v1/embeddings", embeddingsBody, nil)
	if b := readAll(t, res); res.StatusCode != http.StatusOK || b != `{"ok":true}` {
		t.Fatalf("status %d, body %q", res.StatusCode, b)
	}
}

func TestForwardWithoutWorkersIs503(t *testing.T) {
	e := newEnv(t)
	edge := e.startEdge(Config{})
	res := do(t, http.MethodPost, edge.url+"/v1/embeddings", embeddingsBody, nil)
	b := readAll(t, res)
	if res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") == "" || !strings.Contains(b, wire.CodeNoWorker) {
		t.Fatalf("status %d, Retry-After %q, body %s", res.StatusCode, res.Header.Get("Retry-After"), b)
	}
}

func TestForwardRefusesARequestLargerThanAMessage(t *testing.T) {
	e := newEnv(t)
	edge := e.startEdge(Config{MaxBodyBytes: 4 << 20})
	f := e.fakeForwarder(func(int, wire.ForwardRequest) []forwardStep { return answered("{}") })
	big := `{"model":"gpt-test","input":"` + strings.Repeat("x", 2<<20) + `"}`
	res := do(t, http.MethodPost, edge.url+"/v1/embeddings", big, nil)
	b := readAll(t, res)
	if res.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(b, wire.CodeForwardTooLarge) || f.calls.Load() != 0 {
		t.Fatalf("status %d, body %s, %d forwarded", res.StatusCode, b, f.calls.Load())
	}
}

func TestForwardChecksTheRequest(t *testing.T) {
	e := newEnv(t)
	edge := e.startEdge(Config{})
	for _, c := range []struct {
		path, body string
		status     int
		param      string
	}{
		{"/v1/embeddings", `{"model":"nope","input":"x"}`, http.StatusNotFound, "model"},
		{"/v1/embeddings", `{"model":"gpt-test"}`, http.StatusBadRequest, "input"},
		{"/v1/embeddings", `{"model":"gpt-test","input":"x","stream":true}`, http.StatusBadRequest, "stream"},
		{"/v1/completions", `{"model":"gpt-test","prompt":"x","stream":"yes"}`, http.StatusBadRequest, "stream"},
		{"/v1/completions", `{"model":"gpt-test"}`, http.StatusBadRequest, "prompt"},
		{"/v1/completions", `[1]`, http.StatusBadRequest, ""},
	} {
		res := do(t, http.MethodPost, edge.url+c.path, c.body, nil)
		b := readAll(t, res)
		if res.StatusCode != c.status || c.param != "" && !strings.Contains(b, `"param":"`+c.param+`"`) {
			t.Errorf("%s %s: status %d, body %s; want %d on %q", c.path, c.body, res.StatusCode, b, c.status, c.param)
		}
	}
}

func TestForwardChecksTheKeyAsChatDoes(t *testing.T) {
	e := newEnv(t)
	edge := e.startEdge(Config{APIKeys: []APIKey{{Tenant: "acme", KeySHA256: keyHash("k1"), Models: []string{otherModel}, FailFast: true}}})
	reqs := make(chan wire.ForwardRequest, 1)
	e.fakeForwarder(func(_ int, req wire.ForwardRequest) []forwardStep {
		reqs <- req
		return answered(`{}`)
	})
	if res := do(t, http.MethodPost, edge.url+"/v1/embeddings", embeddingsBody, nil); res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("without a key: status %d, want 401", res.StatusCode)
	}
	auth := http.Header{"Authorization": {"Bearer k1"}}
	if res := do(t, http.MethodPost, edge.url+"/v1/embeddings", embeddingsBody, auth); res.StatusCode != http.StatusNotFound {
		t.Fatalf("a model the key may not use: status %d, want 404", res.StatusCode)
	}
	res := do(t, http.MethodPost, edge.url+"/v1/embeddings", `{"model":"gpt-other","input":"x"}`, auth)
	if b, got := readAll(t, res), <-reqs; res.StatusCode != http.StatusOK || got.Tenant != "acme" || !got.FailFast {
		t.Fatalf("status %d (%s), forwarded %+v: want the key's tenant and fail_fast", res.StatusCode, b, got)
	}
}
