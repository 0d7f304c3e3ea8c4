package worker

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/relaydev/relay/relay/fleet"
	"github.com/relaydev/relay/relay/mockupstream"
	"github.com/relaydev/relay/relay/provider"
	"github.com/relaydev/relay/relay/relaytest"
	"github.com/relaydev/relay/relay/wire"
)

// forwardReplies collects the reply of one forwarded request, in order.
type forwardReplies struct {
	t   *testing.T
	sub *nats.Subscription
	// first is the first message, read when the request was sent.
	first *nats.Msg
}

// forward publishes req as an edge does, until a worker takes it, and
// returns its reply's reader.
func (h *harness) forward(req wire.ForwardRequest) *forwardReplies {
	h.t.Helper()
	if req.ID == "" {
		req.ID = "fwd-test"
	}
	var r *forwardReplies
	// A worker subscribes as Run starts: until then, nobody answers.
	relaytest.Eventually(h.t, waitFor, 5*time.Millisecond, func() bool {
		subject := wire.ForwardReplySubject(fmt.Sprintf("t%d", time.Now().UnixNano()))
		sub, err := h.nc.SubscribeSync(subject)
		if err != nil {
			h.t.Fatal(err)
		}
		h.t.Cleanup(func() { _ = sub.Unsubscribe() })
		if err := h.nc.PublishMsg(&nats.Msg{Subject: wire.ForwardSubject, Reply: subject, Data: mustJSON(req)}); err != nil {
			h.t.Fatal(err)
		}
		msg, err := sub.NextMsg(waitFor)
		if errors.Is(err, nats.ErrNoResponders) {
			return false
		}
		if err != nil {
			h.t.Fatalf("first reply message: %v", err)
		}
		r = &forwardReplies{t: h.t, sub: sub, first: msg}
		return true
	})
	return r
}

// next returns the next message, checking that it is numbered in order.
func (r *forwardReplies) next(seq int) (wire.ForwardKind, []byte) {
	r.t.Helper()
	msg, err := r.first, error(nil)
	if r.first == nil {
		msg, err = r.sub.NextMsg(waitFor)
	}
	r.first = nil
	if err != nil {
		r.t.Fatalf("reply message %d: %v", seq, err)
	}
	if got, _ := strconv.Atoi(msg.Header.Get(wire.HeaderForwardSeq)); got != seq {
		r.t.Fatalf("reply message numbered %d, want %d", got, seq)
	}
	return wire.ForwardKind(msg.Header.Get(wire.HeaderForwardKind)), msg.Data
}

// forwardAnswer is a whole reply: its kinds (heartbeats left out), head,
// body or events, and end.
type forwardAnswer struct {
	kinds  []wire.ForwardKind
	head   wire.ForwardHead
	body   []byte
	events []string
	end    wire.ForwardEnd
}

// all reads the reply to its end.
func (r *forwardReplies) all() forwardAnswer {
	r.t.Helper()
	var a forwardAnswer
	for seq := 0; ; seq++ {
		kind, data := r.next(seq)
		if kind != wire.ForwardAlive {
			a.kinds = append(a.kinds, kind)
		}
		switch kind {
		case wire.ForwardHeadKind:
			if err := json.Unmarshal(data, &a.head); err != nil {
				r.t.Fatal(err)
			}
		case wire.ForwardBody:
			a.body = append(a.body, data...)
		case wire.ForwardEvent:
			a.events = append(a.events, string(data))
		case wire.ForwardEndKind:
			if err := json.Unmarshal(data, &a.end); err != nil {
				r.t.Fatal(err)
			}
			return a
		}
	}
}

func embeddingsRequest(t *testing.T, inputs []string, dims int) wire.ForwardRequest {
	t.Helper()
	body, err := json.Marshal(map[string]any{"model": "mock-1", "input": inputs, "dimensions": dims})
	if err != nil {
		t.Fatal(err)
	}
	return wire.ForwardRequest{Endpoint: wire.EndpointEmbeddings, Model: "mock-1", Body: body}
}

func TestForwardCarriesALargeAnswerInPieces(t *testing.T) {
	h := start(t, setup{})
	inputs := make([]string, 64)
	for i := range inputs {
		inputs[i] = fmt.Sprintf("input %d", i)
	}
	a := h.forward(embeddingsRequest(t, inputs, 2048)).all()
	if a.end.Error != nil {
		t.Fatalf("end: %+v", a.end.Error)
	}
	bodies := 0
	for _, k := range a.kinds {
		if k == wire.ForwardBody {
			bodies++
		}
	}
	limit := int(h.nc.MaxPayload())
	if bodies < 2 || len(a.body) <= limit || a.head.Size != len(a.body) || a.head.Status != http.StatusOK {
		t.Fatalf("%d body messages, %d bytes (head: %+v); want an answer over max_payload (%d) in several", bodies, len(a.body), a.head, limit)
	}
	want := slices.Concat([]wire.ForwardKind{wire.ForwardAccepted, wire.ForwardHeadKind}, slices.Repeat([]wire.ForwardKind{wire.ForwardBody}, bodies), []wire.ForwardKind{wire.ForwardEndKind})
	if !slices.Equal(a.kinds, want) {
		t.Fatalf("kinds %v, want %v", a.kinds, want)
	}
	var list struct {
		Data []struct {
			Embedding []float32 `json:"embedding"`
		} `json:"data"`
	}
	if err := json.Unmarshal(a.body, &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Data) != 64 || !slices.Equal(list.Data[63].Embedding, mockupstream.Embedding("input 63", 2048)) {
		t.Fatalf("%d embeddings, or the last is not the mock's", len(list.Data))
	}
}

func TestForwardRotatesARefusedKeyAndReportsToTheGate(t *testing.T) {
	gate := &recordingGate{}
	h := start(t, setup{
		mock: mockupstream.Config{APIKeys: []string{"key-2"}},
		gate: gate,
		providers: func(url string) []provider.Config {
			return []provider.Config{{Name: "mock", BaseURL: url, APIKeys: []string{"key-1", "key-2"}, Models: []string{"mock-1"}, Retry: fastRetry, VerifyKeys: &noKeyChecks}}
		},
	})
	a := h.forward(embeddingsRequest(t, []string{"rotate"}, 8)).all()
	if a.end.Error != nil {
		t.Fatalf("end: %+v", a.end.Error)
	}
	if got := gate.verdicts(); !slices.Equal(got, []string{"mock/mock-1:neutral", "mock/mock-1:success"}) {
		t.Fatalf("gate verdicts %v, want the refused key neutral, then a success", got)
	}
}

func TestForwardPassesAProviderRefusalOnWithoutRetrying(t *testing.T) {
	h := start(t, setup{})
	const input = "[[mock: status=422]] refused"
	a := h.forward(embeddingsRequest(t, []string{input}, 8)).all()
	if a.end.Error == nil || a.end.Error.Status != http.StatusUnprocessableEntity || a.end.Retryable {
		t.Fatalf("end %+v, want the provider's 422, not retryable", a.end)
	}
	if slices.Contains(a.kinds, wire.ForwardHeadKind) {
		t.Fatalf("kinds %v: a refused request has no head", a.kinds)
	}
	key := mockupstream.ConversationKey([]mockupstream.Message{{Role: "user", Content: input}})
	if n := h.mock.Stats().ByConversation[key]; n != 1 {
		t.Fatalf("the provider was called %d times, want once", n)
	}
}

func TestForwardRetriesA429BeforeTheAnswer(t *testing.T) {
	h := start(t, setup{})
	const input = "[[mock: status=429, times=2]] busy"
	a := h.forward(embeddingsRequest(t, []string{input}, 8)).all()
	if a.end.Error != nil || a.head.Status != http.StatusOK {
		t.Fatalf("end %+v, head %+v; want the answer after two 429s", a.end, a.head)
	}
	key := mockupstream.ConversationKey([]mockupstream.Message{{Role: "user", Content: input}})
	if n := h.mock.Stats().ByConversation[key]; n != 3 {
		t.Fatalf("the provider was called %d times, want 3", n)
	}
}

func completionsRequest(t *testing.T, prompt string, stream bool) wire.ForwardRequest {
	t.Helper()
	body, err := json.Marshal(map[string]any{"model": "mock-1", "prompt": prompt, "stream": stream})
	if err != nil {
		t.Fatal(err)
	}
	return wire.ForwardRequest{Endpoint: wire.EndpointCompletions, Model: "mock-1", Stream: stream, Body: body}
}

func TestForwardStreamsEventsInOrder(t *testing.T) {
	h := start(t, setup{mock: mockupstream.Config{Tokens: 6, TokenInterval: -1}})
	a := h.forward(completionsRequest(t, "stream me", true)).all()
	if a.end.Error != nil || a.head.Status != http.StatusOK {
		t.Fatalf("end %+v, head %+v", a.end, a.head)
	}
	text := ""
	for _, e := range a.events {
		var c struct {
			Choices []struct {
				Text string `json:"text"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(e), &c); err != nil {
			t.Fatalf("event %q: %v", e, err)
		}
		for _, ch := range c.Choices {
			text += ch.Text
		}
	}
	if want := mockupstream.AnswerText(userMessages("stream me"), 6); text != want {
		t.Fatalf("text %q, want %q", text, want)
	}
	if a.kinds[1] != wire.ForwardHeadKind || a.kinds[2] != wire.ForwardEvent {
		t.Fatalf("kinds %v: the head comes with the first event", a.kinds)
	}
}

func TestForwardEndsACutStreamWithoutRetrying(t *testing.T) {
	h := start(t, setup{mock: mockupstream.Config{Tokens: 6, TokenInterval: -1}})
	const prompt = "[[mock: cut_after=2]] cut me"
	a := h.forward(completionsRequest(t, prompt, true)).all()
	if a.end.Error == nil || a.end.Retryable || len(a.events) != 2 {
		t.Fatalf("end %+v after %d events; want a final error after 2", a.end, len(a.events))
	}
	key := mockupstream.ConversationKey(userMessages(prompt))
	if n := h.mock.Stats().ByConversation[key]; n != 1 {
		t.Fatalf("the provider was called %d times: text already went to the client, so no retry", n)
	}
}

func TestForwardOfAStoppingWorkerIsRetryable(t *testing.T) {
	h := start(t, setup{noWorker: true})
	w := h.startWorker(Config{}, nil)
	r := h.forward(completionsRequest(t, "[[mock: stall_before=30s]] slow", false))
	if kind := wire.ForwardKind(r.first.Header.Get(wire.HeaderForwardKind)); kind != wire.ForwardAccepted {
		t.Fatalf("first message %q, want accepted", kind)
	}
	w.stop()
	var end wire.ForwardEnd
	for seq := 0; ; seq++ {
		kind, data := r.next(seq)
		if kind == wire.ForwardEndKind {
			if err := json.Unmarshal(data, &end); err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	if !end.Retryable || end.Error == nil || end.Error.Code != wire.CodeWorkerLost {
		t.Fatalf("end %+v, want a retryable worker_lost", end)
	}
}

func TestForwardUnknownModelIs404(t *testing.T) {
	h := start(t, setup{})
	req := embeddingsRequest(t, []string{"x"}, 8)
	req.Model = "no-such-model"
	a := h.forward(req).all()
	if a.end.Error == nil || a.end.Error.Status != http.StatusNotFound {
		t.Fatalf("end %+v, want a 404", a.end)
	}
}

func TestForwardStopsTheCallWhenTheEdgeLeaves(t *testing.T) {
	gate := &recordingGate{}
	h := start(t, setup{gate: gate})
	r := h.forward(completionsRequest(t, "[[mock: stall_before=30s]] nobody waits", false))
	if err := r.sub.Unsubscribe(); err != nil {
		t.Fatal(err)
	}
	// The stall outlasts the test: a report means the call was ended.
	relaytest.Eventually(t, waitFor, 10*time.Millisecond, func() bool {
		gate.mu.Lock()
		defer gate.mu.Unlock()
		return len(gate.reports) == 1
	})
	if got := gate.verdicts(); !slices.Equal(got, []string{"mock/mock-1:neutral"}) {
		t.Fatalf("verdicts %v: a call ended for want of a listener says nothing of the provider", got)
	}
}

func TestForwardFailsFastWhenEveryProviderIsUnavailable(t *testing.T) {
	gate := &recordingGate{refuse: map[string]bool{"mock": true}, cause: fleet.ErrProviderOpen}
	h := start(t, setup{gate: gate})
	req := embeddingsRequest(t, []string{"x"}, 8)
	req.FailFast = true
	a := h.forward(req).all()
	if a.end.Error == nil || a.end.Error.Status != http.StatusServiceUnavailable || a.end.Error.Code != wire.CodeBreakerOpen || a.end.Retryable {
		t.Fatalf("end %+v, want a 503 circuit_breaker_open", a.end)
	}
}

func TestForwardRefusesAnEndpointItDoesNotForward(t *testing.T) {
	h := start(t, setup{})
	req := embeddingsRequest(t, []string{"x"}, 8)
	req.Endpoint = "files"
	a := h.forward(req).all()
	if a.end.Error == nil || a.end.Error.Status != http.StatusBadRequest || len(h.mock.Stats().ByStatus) != 0 {
		t.Fatalf("end %+v, mock %+v: want a 400 and no call", a.end, h.mock.Stats())
	}
}

func TestForwardEndsAnEventLargerThanAMessageClearly(t *testing.T) {
	// Within what the relay reads of an event (upstream.DefaultMaxEventSize),
	// too large for a message with its headers.
	const frame = len(`{"choices":[{"text":""}]}`)
	huge := `{"choices":[{"text":"` + strings.Repeat("x", 1<<20-16-frame) + `"}]}`
	h := start(t, setup{wrap: func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/v1/completions" {
				next.ServeHTTP(w, r)
				return
			}
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "data: %s\n\ndata: [DONE]\n\n", huge)
		})
	}})
	a := h.forward(completionsRequest(t, "huge", true)).all()
	if a.end.Error == nil || a.end.Error.Status != http.StatusBadGateway || a.end.Error.Code != wire.CodeForwardTooLarge {
		t.Fatalf("end %+v, want a 502 forward_too_large", a.end)
	}
	if strings.Contains(a.end.Error.Message, "nats:") {
		t.Fatalf("message %q quotes the NATS client", a.end.Error.Message)
	}
}

func TestForwardSkipsProvidersOfAnotherDialect(t *testing.T) {
	h := start(t, setup{providers: func(url string) []provider.Config {
		return []provider.Config{
			{Name: "claude", Type: provider.TypeAnthropic, BaseURL: "http://127.0.0.1:1/v1", Models: []string{"mock-1"}, BackupProviders: []string{"mock"}, Retry: fastRetry},
			{Name: "mock", BaseURL: url, Models: []string{"mock-1"}, Retry: fastRetry},
			{Name: "claude-only", Type: provider.TypeAnthropic, BaseURL: "http://127.0.0.1:1/v1", Models: []string{"mock-2"}, Retry: fastRetry},
		}
	}})
	if a := h.forward(embeddingsRequest(t, []string{"x"}, 8)).all(); a.end.Error != nil || a.head.Provider != "mock" {
		t.Fatalf("end %+v, head %+v: want the answer of the OpenAI-compatible provider", a.end, a.head)
	}
	req := embeddingsRequest(t, []string{"x"}, 8)
	req.Model = "mock-2"
	if a := h.forward(req).all(); a.end.Error == nil || a.end.Error.Status != http.StatusBadRequest || a.end.Error.Code != "model_not_supported" {
		t.Fatalf("end %+v, want a 400 model_not_supported", a.end)
	}
}

func TestForwardBeyondMaxInflightIsRetryable(t *testing.T) {
	h := start(t, setup{worker: Config{MaxInflight: 1}})
	h.forward(completionsRequest(t, "[[mock: stall_before=30s]] holds the slot", false))
	a := h.forward(embeddingsRequest(t, []string{"no room"}, 8)).all()
	if !a.end.Retryable || a.end.Error == nil || a.end.Error.Status != http.StatusServiceUnavailable {
		t.Fatalf("end %+v, want a retryable 503: another worker may have room", a.end)
	}
}

// The forward slots are shared between the tenants: one tenant's slow
// requests leave a slot for another tenant that runs none.
func TestForwardSlotsKeepOneForAnotherTenant(t *testing.T) {
	h := start(t, setup{worker: Config{MaxInflight: 3}})
	slow := func(tenant string) forwardAnswer {
		req := completionsRequest(t, "[[mock: stall_before=30s]] holds a slot", false)
		req.Tenant = tenant
		r := h.forward(req)
		if kind, data := r.next(0); kind == wire.ForwardEndKind {
			var end wire.ForwardEnd
			_ = json.Unmarshal(data, &end)
			return forwardAnswer{end: end}
		}
		return forwardAnswer{}
	}
	for i := range 2 {
		if a := slow("alpha"); a.end.Error != nil {
			t.Fatalf("alpha's request %d: %+v", i, a.end)
		}
	}
	if a := slow("alpha"); !a.end.Retryable || a.end.Error == nil || a.end.Error.Status != http.StatusServiceUnavailable {
		t.Fatalf("alpha's third request took the last slot: end %+v", a.end)
	}
	req := embeddingsRequest(t, []string{"beta's"}, 8)
	req.Tenant = "beta"
	if a := h.forward(req).all(); a.end.Error != nil || a.head.Status != http.StatusOK {
		t.Fatalf("beta's embeddings beside alpha's requests: end %+v, head %+v", a.end, a.head)
	}
}
