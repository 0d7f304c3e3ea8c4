package worker

import (
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"encoding/json"
	"github.com/relaydev/relay/relay/chunklog"
	"github.com/relaydev/relay/relay/fleet"
	"github.com/relaydev/relay/relay/mockupstream"
	"github.com/relaydev/relay/relay/provider"
	"github.com/relaydev/relay/relay/wire"
)

// twoModels is a provider "mock" serving mock-1 and mock-2, with mock-1
// falling back to mock-2.
func twoModels(mockURL string) []provider.Config {
	return []provider.Config{{Name: "mock", BaseURL: mockURL, Models: []string{"mock-1", "mock-2"}, Retry: fastRetry}}
}

// endOf returns the end frame.
func endOf(frames []chunklog.Entry) wire.Frame { return frames[len(frames)-1].Frame }

// A cut answer is continued exactly, whether the provider is called over
// HTTP/1.1, where the cut closes the connection, or over h2c
// (http2_prior_knowledge), where it resets one stream of a shared
// connection.
func TestCutStreamIsContinued(t *testing.T) {
	for _, tc := range []struct {
		name           string
		priorKnowledge bool
		proto          string
	}{{"http1", false, "HTTP/1.1"}, {"h2c", true, "HTTP/2.0"}} {
		t.Run(tc.name, func(t *testing.T) {
			gate := &recordingGate{}
			h := start(t, setup{
				mock: mockupstream.Config{Tokens: 40, TokenInterval: -1},
				gate: gate,
				providers: func(mockURL string) []provider.Config {
					return []provider.Config{{Name: "mock", BaseURL: mockURL, APIKeys: []string{"key-1"}, Models: []string{"mock-1"}, Retry: fastRetry, HTTP2PriorKnowledge: tc.priorKnowledge}}
				},
			})
			id := wire.NewStreamID()
			content := "[[mock: cut_after=5]] hello"
			h.submit(id, content)

			frames := h.waitEnd(id)
			text, chunks := chunkText(t, frames)
			if want := mockupstream.AnswerText(userMessages(content), 40); text != want {
				t.Fatalf("text = %q\nwant   %q", text, want)
			}
			i := slices.IndexFunc(chunks, func(c wire.Frame) bool { return c.Attempt == 2 })
			if i <= 0 || chunks[i].Seam != wire.SeamContinuation || chunks[0].Seam != "" {
				t.Fatalf("chunks = %+v: want attempt 1 without seam, then a continuation", chunks)
			}
			if end := endOf(frames); end.Status != wire.StatusDone || end.Attempts != 2 {
				t.Fatalf("end = %+v, want done after 2 attempts", end)
			}
			h.waitJob(id)
			if got, want := gate.verdicts(), []string{"mock/mock-1:failure", "mock/mock-1:success"}; !slices.Equal(got, want) {
				t.Fatalf("gate reports %v, want %v", got, want)
			}
			// The key's check (GET /models) and the two calls.
			if got := h.mock.Stats().ByProtocol; got[tc.proto] != 3 || len(got) != 1 {
				t.Fatalf("requests by protocol %v, want 3 over %s", got, tc.proto)
			}
		})
	}
}

// A model that fails without publishing anything is left after its
// max_retries_per_model (default 3), and the fallback starts the answer.
func TestModelFailingWithoutTextFallsBack(t *testing.T) {
	gate := &recordingGate{}
	h := start(t, setup{
		mock:      mockupstream.Config{Tokens: 20, TokenInterval: -1},
		providers: twoModels,
		models:    []provider.Model{{Name: "mock-1", Fallbacks: []provider.Fallback{{Model: "mock-2"}}}},
		gate:      gate,
	})
	id := wire.NewStreamID()
	content := "[[mock: status=503, times=4]] hello"
	h.submit(id, content)

	frames := h.waitEnd(id)
	text, chunks := chunkText(t, frames)
	if want := mockupstream.AnswerText(userMessages(content), 20); text != want {
		t.Fatalf("text = %q\nwant   %q", text, want)
	}
	if c := chunks[0]; c.Seam != wire.SeamFallback || c.Model != "mock-2" || c.Attempt != 5 {
		t.Fatalf("first chunk = %+v, want a fallback to mock-2 at attempt 5", c)
	}
	h.waitJob(id)
	want := []string{"mock/mock-1:failure", "mock/mock-1:failure", "mock/mock-1:failure", "mock/mock-1:failure", "mock/mock-2:success"}
	if got := gate.verdicts(); !slices.Equal(got, want) {
		t.Fatalf("gate reports %v, want %v", got, want)
	}
}

// A request whose key may use mock-1 only is never answered by its
// fallback mock-2: the route leaves out the models the key may not use.
func TestKeysModelsBoundTheFallbacks(t *testing.T) {
	gate := &recordingGate{}
	h := start(t, setup{
		mock:      mockupstream.Config{Tokens: 20, TokenInterval: -1},
		providers: twoModels,
		models:    []provider.Model{{Name: "mock-1", Fallbacks: []provider.Fallback{{Model: "mock-2"}}}},
		gate:      gate,
	})
	id := wire.NewStreamID()
	// mock-1 fails more often than its retries; mock-2 would answer.
	body, _ := json.Marshal(map[string]any{"model": "mock-1", "messages": userMessages("[[mock: status=503, times=50]] hello")})
	h.submitRequest(wire.Request{StreamID: id, Model: "mock-1", Body: body, Created: time.Now().Unix(), Models: []string{"mock-1"}})

	end := endOf(h.waitEnd(id))
	if end.Status != wire.StatusFailed {
		t.Fatalf("end = %+v; want failed, with mock-2 out of the key's reach", end)
	}
	h.waitJob(id)
	for _, v := range gate.verdicts() {
		if strings.HasPrefix(v, "mock/mock-2") {
			t.Fatalf("mock-2 was called: %v", gate.verdicts())
		}
	}
}

func TestGateRefusalSkipsTheProvider(t *testing.T) {
	gate := &recordingGate{refuse: map[string]bool{"a": true}}
	h := start(t, setup{
		mock: mockupstream.Config{Tokens: 10, TokenInterval: -1},
		providers: func(url string) []provider.Config {
			return []provider.Config{
				{Name: "a", BaseURL: url, Models: []string{"mock-1"}, Retry: fastRetry},
				{Name: "b", BaseURL: url, Models: []string{"mock-1"}, Retry: fastRetry},
			}
		},
		gate: gate,
	})
	id := wire.NewStreamID()
	h.submit(id, "hello")

	frames := h.waitEnd(id)
	_, chunks := chunkText(t, frames)
	if c := chunks[0]; c.Provider != "b" || c.Seam != wire.SeamFallback || c.Attempt != 1 {
		t.Fatalf("first chunk = %+v, want provider b, seam fallback, attempt 1", c)
	}
	if end := endOf(frames); end.Status != wire.StatusDone || end.Attempts != 1 {
		t.Fatalf("end = %+v, want done after 1 call", end)
	}
	h.waitJob(id)
	if got := gate.verdicts(); !slices.Equal(got, []string{"b/mock-1:success"}) {
		t.Fatalf("gate reports %v: a refused call must not be reported", got)
	}
	if st := h.mock.Stats(); st.ChatRequests != 1 {
		t.Fatalf("%d upstream requests, want 1", st.ChatRequests)
	}
}

func TestEveryProviderRefusedFails503(t *testing.T) {
	gate := &recordingGate{refuse: map[string]bool{"mock": true}}
	h := start(t, setup{mock: mockupstream.Config{TokenInterval: -1}, gate: gate})
	id := wire.NewStreamID()
	h.submit(id, "hello")

	end := endOf(h.waitEnd(id))
	if end.Status != wire.StatusFailed || end.Error == nil || end.Error.Status != http.StatusServiceUnavailable {
		t.Fatalf("end = %+v, error %+v; want failed with 503", end, end.Error)
	}
	if st := h.mock.Stats(); st.ChatRequests != 0 {
		t.Fatalf("%d upstream requests, want none", st.ChatRequests)
	}
}

// The end frame says which limit ended a stream: the gate's (its retry
// budget, its breaker) or the request's own retries.
func TestEndFrameNamesTheLimit(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cause   error
		content string
		status  int
		code    string
		says    string
	}{
		{"budget", fleet.ErrRetryBudget, "hello", http.StatusServiceUnavailable, "retry_budget_exhausted", "retry budget of provider mock is spent"},
		{"breaker", fleet.ErrProviderOpen, "hello", http.StatusServiceUnavailable, "circuit_breaker_open", "circuit breaker of provider mock is open"},
		{"retries", nil, "[[mock: status=503, times=0]] hello", http.StatusBadGateway, "retries_exhausted", "retries are exhausted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gate := &recordingGate{}
			if tc.cause != nil {
				gate.refuse, gate.cause = map[string]bool{"mock": true}, tc.cause
			}
			h := start(t, setup{mock: mockupstream.Config{Tokens: 10, TokenInterval: -1}, gate: gate})
			id := wire.NewStreamID()
			h.submit(id, tc.content)
			end := endOf(h.waitEnd(id))
			if end.Status != wire.StatusFailed || end.Error == nil || end.Error.Status != tc.status || end.Error.Code != tc.code ||
				!strings.Contains(end.Error.Message, tc.says) {
				t.Fatalf("end = %+v, error %+v; want failed, %d, code %s, saying %q", end, end.Error, tc.status, tc.code, tc.says)
			}
		})
	}
}

// A cut answer's calls are reported as having streamed content (which a
// breaker counts as a sign of health); calls that failed before any
// content are not.
func TestReportsSayWhetherTheCallStreamed(t *testing.T) {
	gate := &recordingGate{}
	h := start(t, setup{mock: mockupstream.Config{Tokens: 20, TokenInterval: -1}, gate: gate})
	id := wire.NewStreamID()
	h.submit(id, "[[mock: cut_after=3, times=2]] hello")
	if end := endOf(h.waitEnd(id)); end.Status != wire.StatusDone {
		t.Fatalf("end = %+v", end)
	}
	id2 := wire.NewStreamID()
	h.submit(id2, "[[mock: status=502]] hello")
	if end := endOf(h.waitEnd(id2)); end.Status != wire.StatusDone {
		t.Fatalf("end = %+v", end)
	}
	h.waitJob(id)
	h.waitJob(id2)
	gate.mu.Lock()
	defer gate.mu.Unlock()
	var got []string
	for _, r := range gate.reports {
		got = append(got, fmt.Sprintf("%s/%v", r.Verdict, r.Streamed))
	}
	want := []string{"failure/true", "failure/true", "success/true", "failure/false", "success/true"}
	if !slices.Equal(got, want) {
		t.Fatalf("reports (verdict/streamed) %v, want %v", got, want)
	}
}

// When every key is refused the provider failed once (the second key's
// refusal), and the request fails without retrying a provider that will
// refuse again.
func TestEveryKeyRefused(t *testing.T) {
	gate := &recordingGate{}
	h := start(t, setup{
		mock: mockupstream.Config{TokenInterval: -1, APIKeys: []string{"good"}},
		providers: func(url string) []provider.Config {
			return []provider.Config{{Name: "mock", BaseURL: url, APIKeys: []string{"bad-1", "bad-2"}, Models: []string{"mock-1"}, Retry: fastRetry, VerifyKeys: &noKeyChecks}}
		},
		gate: gate,
	})
	id := wire.NewStreamID()
	h.submit(id, "hello")

	end := endOf(h.waitEnd(id))
	if end.Status != wire.StatusFailed || end.Error == nil || !strings.Contains(end.Error.Message, "credentials") {
		t.Fatalf("end = %+v, error %+v; want failed on credentials", end, end.Error)
	}
	h.waitJob(id)
	if got, want := gate.verdicts(), []string{"mock/mock-1:neutral", "mock/mock-1:failure"}; !slices.Equal(got, want) {
		t.Fatalf("gate reports %v, want %v", got, want)
	}
	if st := h.mock.Stats(); st.ByStatus[http.StatusUnauthorized] != 2 {
		t.Fatalf("mock stats %+v, want two 401s", st)
	}
}

// An answer cut after it published tool calls is not continued: a
// continuation would have to resume inside a call's arguments.
func TestToolCallsAreNotContinued(t *testing.T) {
	var calls atomic.Int32
	h := start(t, setup{
		wrap: func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method != http.MethodPost {
					next.ServeHTTP(w, r) // the worker's key checks
					return
				}
				calls.Add(1)
				w.Header().Set("Content-Type", "text/event-stream")
				fmt.Fprint(w, `data: {"model":"mock-1","choices":[{"index":0,"delta":{"role":"assistant","content":"Checking."}}]}`+"\n\n")
				fmt.Fprint(w, `data: {"model":"mock-1","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":"{\"a\":"}}]}}]}`+"\n\n")
				w.(http.Flusher).Flush()
				panic(http.ErrAbortHandler)
			})
		},
	})
	id := wire.NewStreamID()
	h.submit(id, "call a tool")

	frames := h.waitEnd(id)
	text, chunks := chunkText(t, frames)
	if text != "Checking." || len(chunks[len(chunks)-1].ToolCalls) == 0 {
		t.Fatalf("chunks = %+v, want the text and the tool call published", chunks)
	}
	end := endOf(frames)
	if end.Status != wire.StatusIncomplete || end.Error == nil || !strings.Contains(end.Error.Message, "tool calls") {
		t.Fatalf("end = %+v, error %+v; want incomplete because of the tool calls", end, end.Error)
	}
	h.waitJob(id)
	if n := calls.Load(); n != 1 {
		t.Fatalf("%d upstream calls, want 1", n)
	}
}

func TestUnknownModelFails404(t *testing.T) {
	h := start(t, setup{mock: mockupstream.Config{TokenInterval: -1}})
	id := wire.NewStreamID()
	h.submitModel(id, "no-such-model", "hello")

	end := endOf(h.waitEnd(id))
	if end.Status != wire.StatusFailed || end.Error == nil || end.Error.Status != http.StatusNotFound || end.Error.Code != "model_not_found" {
		t.Fatalf("end = %+v, error %+v; want failed with 404 model_not_found", end, end.Error)
	}
}

// The cost sums every call's usage at the price of the model called, a
// call cut before its usage included.
func TestCostPricesEveryCall(t *testing.T) {
	price1 := provider.Price{InputPerMTok: 1000, OutputPerMTok: 3000}
	price2 := provider.Price{InputPerMTok: 7000, OutputPerMTok: 11000}
	h := start(t, setup{
		mock:      mockupstream.Config{Tokens: 30, TokenInterval: -1},
		providers: twoModels,
		models: []provider.Model{
			{Name: "mock-1", Price: price1, MaxRetriesPerModel: -1, Fallbacks: []provider.Fallback{{Model: "mock-2"}}},
			{Name: "mock-2", Price: price2},
		},
	})
	id := wire.NewStreamID()
	// The first call ends early, without its usage chunk, and mock-1
	// allows no retry: mock-2 continues the answer.
	content := "[[mock: eof_after=10]] hello"
	h.submit(id, content)

	frames := h.waitEnd(id)
	end := endOf(frames)
	if end.Status != wire.StatusDone || end.Attempts != 2 || end.Usage == nil {
		t.Fatalf("end = %+v, want done after a fallback, with usage", end)
	}
	// Only the second call reported usage, and it ran on mock-2; the
	// first call's 10 tokens are counted from its deltas, at mock-1's
	// price.
	want := price1.Cost(0, 10) + price2.Cost(end.Usage.PromptTokens, 20)
	if math.Abs(end.Cost-want) > 1e-9 || end.Usage.CompletionTokens != 30 {
		t.Fatalf("cost %v, usage %+v; want %v for 10 completion tokens on mock-1 and 20 on mock-2", end.Cost, end.Usage, want)
	}
}

// A provider that takes the call and sends nothing for the whole
// first-byte bound is left after that one call: the next step of the
// route answers, on the same provider entry or another. With no next
// step, the same candidate is called again.
func TestSilentProviderIsLeftAfterOneTimeout(t *testing.T) {
	const bound = 300 * time.Millisecond
	for _, tc := range []struct {
		name      string
		providers func(string) []provider.Config
		models    []provider.Model
		want      []string // the gate's verdicts
		provider  string   // of the answer's first chunk
		model     string
	}{
		{"same entry", func(url string) []provider.Config {
			return []provider.Config{{Name: "mock", BaseURL: url, Models: []string{"mock-1", "mock-2"}, Retry: fastRetry, FirstTokenTimeout: bound}}
		}, []provider.Model{{Name: "mock-1", Fallbacks: []provider.Fallback{{Model: "mock-2"}}}},
			[]string{"mock/mock-1:failure", "mock/mock-2:success"}, "mock", "mock-2"},
		{"another entry", func(url string) []provider.Config {
			return []provider.Config{
				{Name: "a", BaseURL: url, Models: []string{"mock-1"}, Retry: fastRetry, FirstTokenTimeout: bound},
				{Name: "b", BaseURL: url, Models: []string{"mock-1"}, Retry: fastRetry, FirstTokenTimeout: bound},
			}
		}, nil, []string{"a/mock-1:failure", "b/mock-1:success"}, "b", "mock-1"},
		{"no next step", func(url string) []provider.Config {
			return []provider.Config{{Name: "mock", BaseURL: url, Models: []string{"mock-1"}, Retry: fastRetry, FirstTokenTimeout: bound}}
		}, nil, []string{"mock/mock-1:failure", "mock/mock-1:success"}, "mock", "mock-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gate := &recordingGate{}
			h := start(t, setup{
				mock:      mockupstream.Config{Tokens: 10, TokenInterval: -1},
				providers: tc.providers,
				models:    tc.models,
				gate:      gate,
			})
			id := wire.NewStreamID()
			content := "[[mock: stall_before=10s, times=1]] anyone?"
			h.submit(id, content)

			frames := h.waitEnd(id)
			text, chunks := chunkText(t, frames)
			if want := mockupstream.AnswerText(userMessages(content), 10); text != want {
				t.Fatalf("text = %q\nwant   %q", text, want)
			}
			if c := chunks[0]; c.Provider != tc.provider || c.Model != tc.model || c.Attempt != 2 {
				t.Fatalf("first chunk = %+v, want %s/%s at attempt 2", c, tc.provider, tc.model)
			}
			h.waitJob(id)
			if got := gate.verdicts(); !slices.Equal(got, tc.want) {
				t.Fatalf("gate reports %v, want %v", got, tc.want)
			}
		})
	}
}

func TestTooLongMovesToAModelWhoseWindowFits(t *testing.T) {
	// mock-1 and mock-3 cannot hold the request, mock-2 can.
	windows := map[string]int{"mock-1": 30, "mock-3": 40}
	models := func(fallbacks ...string) []provider.Model {
		m := []provider.Model{{Name: "mock-1", ContextWindow: 30}, {Name: "mock-3", ContextWindow: 40}}
		for _, f := range fallbacks {
			m[0].Fallbacks = append(m[0].Fallbacks, provider.Fallback{Model: f})
		}
		return m
	}
	for _, tc := range []struct {
		name      string
		providers func(string) []provider.Config
		models    []provider.Model
		want      []string // the gate's verdicts
		status    int      // of a failed stream, 0 if it is answered
	}{
		{"same entry", func(url string) []provider.Config {
			return []provider.Config{{Name: "mock", BaseURL: url, Models: []string{"mock-1", "mock-2", "mock-3"}, Retry: fastRetry}}
		}, models("mock-3", "mock-2"), []string{"mock/mock-1:neutral", "mock/mock-2:success"}, 0},
		{"another entry", func(url string) []provider.Config {
			return []provider.Config{
				{Name: "a", BaseURL: url, Models: []string{"mock-1", "mock-3"}, Retry: fastRetry, BackupProviders: []string{"b"}},
				{Name: "b", BaseURL: url, Models: []string{"mock-1", "mock-2"}, Retry: fastRetry},
			}
		}, models("mock-3", "mock-2"), []string{"a/mock-1:neutral", "b/mock-2:success"}, 0},
		{"no step fits", func(url string) []provider.Config {
			return []provider.Config{{Name: "mock", BaseURL: url, Models: []string{"mock-1", "mock-2", "mock-3"}, Retry: fastRetry}}
		}, models("mock-3"), []string{"mock/mock-1:neutral"}, http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gate := &recordingGate{}
			h := start(t, setup{
				mock:      mockupstream.Config{Tokens: 10, TokenInterval: -1, Models: []string{"mock-1", "mock-2", "mock-3"}, ContextWindows: windows},
				providers: tc.providers,
				models:    tc.models,
				gate:      gate,
			})
			id := wire.NewStreamID()
			content := strings.Repeat("a long question ", 12)
			h.submit(id, content)

			frames := h.waitEnd(id)
			end := frames[len(frames)-1].Frame
			if tc.status != 0 {
				if end.Status != wire.StatusFailed || end.Error == nil || end.Error.Status != tc.status || !strings.Contains(end.Error.Message, "maximum context length") {
					t.Fatalf("end = %+v (error %+v), want the provider's %d", end, end.Error, tc.status)
				}
			} else {
				text, chunks := chunkText(t, frames)
				if want := mockupstream.AnswerText(userMessages(content), 10); text != want || end.Status != wire.StatusDone {
					t.Fatalf("text = %q (%s)\nwant   %q", text, end.Status, want)
				}
				if c := chunks[0]; c.Model != "mock-2" || c.Attempt != 2 {
					t.Fatalf("first chunk = %+v, want mock-2 at attempt 2", c)
				}
			}
			h.waitJob(id)
			if got := gate.verdicts(); !slices.Equal(got, tc.want) {
				t.Fatalf("gate reports %v, want %v", got, tc.want)
			}
		})
	}
}
