package worker

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relaydev/relay/relay/chunklog"
	"github.com/relaydev/relay/relay/fleet"
	"github.com/relaydev/relay/relay/mockupstream"
	"github.com/relaydev/relay/relay/provider"
	"github.com/relaydev/relay/relay/relaytest"
	"github.com/relaydev/relay/relay/wire"
)

// hedgeSLA is the first_token_sla of the hedging tests: far below the
// stalls they order, far above a mock's first token at full speed.
const hedgeSLA = 150 * time.Millisecond

// hedged is a world of two providers of mock-1, "slow" then "fast", on
// the same mock, where mock-1 hedges after hedgeSLA with budget. A test
// may wrap the mock, and put a provider under a path prefix of its own
// (slowPath, fastPath) for its wrapper to serve differently.
func hedged(gate Gate, budget float64, wrap func(http.Handler) http.Handler, slowPath, fastPath string) setup {
	return setup{
		mock: mockupstream.Config{Tokens: 12, TokenInterval: -1},
		wrap: wrap,
		providers: func(mockURL string) []provider.Config {
			base := strings.TrimSuffix(mockURL, "/v1")
			return []provider.Config{
				{Name: "slow", BaseURL: base + slowPath + "/v1", Models: []string{"mock-1"}, Retry: fastRetry},
				{Name: "fast", BaseURL: base + fastPath + "/v1", Models: []string{"mock-1"}, Retry: fastRetry},
			}
		},
		models: []provider.Model{{Name: "mock-1", FirstTokenSLA: hedgeSLA, HedgeBudget: budget,
			Price: provider.Price{InputPerMTok: 1e6, OutputPerMTok: 1e6}}},
		gate: gate,
	}
}

func TestHedgeFirstTokenWins(t *testing.T) {
	gate := &recordingGate{}
	h := start(t, hedged(gate, 0, nil, "", ""))
	id := wire.NewStreamID()
	// The conversation's first call waits an hour for its first token;
	// the directive applies to it alone, so the hedge answers at once.
	content := "[[mock: first_token_after=1h]] hello"
	begun := time.Now()
	h.submit(id, content)

	frames := h.waitEnd(id)
	took := time.Since(begun)
	text, chunks := chunkText(t, frames)
	if want := mockupstream.AnswerText(userMessages(content), 12); text != want {
		t.Fatalf("text = %q\nwant   %q", text, want)
	}
	for _, c := range chunks {
		if c.Provider != "fast" || c.Attempt != 2 {
			t.Fatalf("chunk %+v: want every chunk from the hedge, fast, attempt 2", c)
		}
	}
	if chunks[0].Seam != wire.SeamFallback {
		t.Fatalf("first chunk %+v: want the fallback seam", chunks[0])
	}
	end := endOf(frames)
	if end.Status != wire.StatusDone || end.Attempts != 2 {
		t.Fatalf("end = %+v, want done after 2 calls", end)
	}
	if took > hedgeSLA+5*time.Second {
		t.Fatalf("answer took %v", took)
	}
	h.waitJob(id)
	// The hedge's outcome, then the cancelled call's, which is no
	// failure of its provider.
	if got, want := gate.verdicts(), []string{"fast/mock-1:success", "slow/mock-1:neutral"}; !slices.Equal(got, want) {
		t.Fatalf("gate reports %v, want %v", got, want)
	}
	relaytest.Eventually(t, waitFor, 5*time.Millisecond, func() bool { return h.mock.Stats().FirstTokenAbandoned == 1 })
}

// stallsUnder wraps the mock so that the calls under path prefix
// /stalls send a usage chunk of 7 prompt tokens, then nothing until their
// client leaves, which sets cancelled.
func stallsUnder(cancelled *atomic.Bool) func(http.Handler) http.Handler {
	return func(mock http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !strings.HasPrefix(r.URL.Path, "/stalls/") {
				mock.ServeHTTP(w, r)
				return
			}
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, `data: {"id":"x","object":"chat.completion.chunk","model":"mock-1","choices":[],"usage":{"prompt_tokens":7,"completion_tokens":0,"total_tokens":7}}`+"\n\n")
			w.(http.Flusher).Flush()
			<-r.Context().Done()
			cancelled.Store(true)
		})
	}
}

// The losing call's usage counts as any call's: a provider that reported
// its prompt tokens before stalling is paid for.
func TestHedgeLoserUsageIsCounted(t *testing.T) {
	var cancelled atomic.Bool
	wrap := stallsUnder(&cancelled)
	gate := &recordingGate{}
	h := start(t, hedged(gate, 0, wrap, "/stalls", ""))
	id := wire.NewStreamID()
	content := "hello"
	h.submit(id, content)

	frames, _ := exactAnswer(t, h, id, content)
	end := endOf(frames)
	if end.Usage == nil {
		t.Fatalf("end = %+v: no usage", end)
	}
	// The mock's own call reports its prompt and 12 completion tokens.
	winnerPrompt := end.Usage.PromptTokens - 7
	if end.Usage.CompletionTokens != 12 || winnerPrompt <= 0 {
		t.Fatalf("usage = %+v: want the hedge's and the loser's 7 prompt tokens", end.Usage)
	}
	// The price is 1 per token each way.
	if want := float64(end.Usage.PromptTokens + end.Usage.CompletionTokens); end.Cost != want {
		t.Fatalf("cost = %v, want %v", end.Cost, want)
	}
	h.waitJob(id)
	relaytest.Eventually(t, waitFor, 5*time.Millisecond, cancelled.Load)
	gate.mu.Lock()
	defer gate.mu.Unlock()
	for _, r := range gate.reports {
		if r.Provider == "slow" && r.Tokens != 7 {
			t.Fatalf("loser report %+v: want its 7 tokens", r)
		}
	}
}

// The late call may still win: its first token comes before the hedge's,
// and the hedge is the call cancelled.
func TestHedgeLateCallStillWins(t *testing.T) {
	var cancelled atomic.Bool
	gate := &recordingGate{}
	h := start(t, hedged(gate, 0, stallsUnder(&cancelled), "", "/stalls"))
	id := wire.NewStreamID()
	content := "[[mock: first_token_after=600ms]] hello"
	h.submit(id, content)

	frames, chunks := exactAnswer(t, h, id, content)
	for _, c := range chunks {
		if c.Provider != "slow" || c.Attempt != 1 {
			t.Fatalf("chunk %+v: want every chunk from the late call, slow, attempt 1", c)
		}
	}
	if end := endOf(frames); end.Status != wire.StatusDone || end.Attempts != 2 || end.Usage.PromptTokens <= 7 {
		t.Fatalf("end = %+v, want done after 2 calls, the hedge's 7 prompt tokens included", end)
	}
	h.waitJob(id)
	relaytest.Eventually(t, waitFor, 5*time.Millisecond, cancelled.Load)
	// The hedge hears its verdict when the race ends, the late call when
	// the attempt does.
	if got, want := gate.verdicts(), []string{"fast/mock-1:neutral", "slow/mock-1:success"}; !slices.Equal(got, want) {
		t.Fatalf("gate reports %v, want %v", got, want)
	}
}

func TestHedgeBudgetSpentNoHedge(t *testing.T) {
	gate := &recordingGate{}
	// The reserve allows one hedge; a ratio of 1% allows no second among
	// two calls.
	h := start(t, hedged(gate, 0.01, nil, "", ""))
	first := wire.NewStreamID()
	h.submit(first, "[[mock: first_token_after=1h]] one")
	h.waitEnd(first)
	h.waitJob(first)

	second := wire.NewStreamID()
	content := "[[mock: first_token_after=600ms]] two"
	h.submit(second, content)
	frames, chunks := exactAnswer(t, h, second, content)
	if c := chunks[0]; c.Provider != "slow" || c.Attempt != 1 {
		t.Fatalf("first chunk %+v: want the late call's own answer", c)
	}
	if end := endOf(frames); end.Attempts != 1 {
		t.Fatalf("end = %+v, want 1 call", end)
	}
	if _, ok := h.logs.find(func(l map[string]string) bool {
		return l["msg"] == "first token late; the hedge budget is spent" && l["stream"] == second
	}); !ok {
		t.Fatal("no log line says the budget refused the hedge")
	}
	if got := h.mock.Stats().ByConversation[mockupstream.ConversationKey(userMessages(content))]; got != 1 {
		t.Fatalf("the mock had %d calls of the second request, want 1", got)
	}
}

func TestHedgeNeverGoesToAnOpenBreaker(t *testing.T) {
	gate := &recordingGate{refuse: map[string]bool{"fast": true}, cause: fleet.ErrProviderOpen}
	h := start(t, hedged(gate, 0, nil, "", ""))
	id := wire.NewStreamID()
	content := "[[mock: first_token_after=600ms]] hello"
	h.submit(id, content)

	_, chunks := exactAnswer(t, h, id, content)
	if c := chunks[0]; c.Provider != "slow" || c.Attempt != 1 {
		t.Fatalf("first chunk %+v: want the late call's own answer", c)
	}
	h.waitJob(id)
	gate.mu.Lock()
	admits := slices.Clone(gate.admits)
	gate.mu.Unlock()
	if want := []string{"slow/mock-1", "fast/mock-1"}; !slices.Equal(admits, want) {
		t.Fatalf("gate asked for %v, want %v (the hedge asked, and refused)", admits, want)
	}
	if got, want := gate.verdicts(), []string{"slow/mock-1:success"}; !slices.Equal(got, want) {
		t.Fatalf("gate reports %v, want %v", got, want)
	}
	if got := h.mock.Stats().ByConversation[mockupstream.ConversationKey(userMessages(content))]; got != 1 {
		t.Fatalf("the mock had %d calls, want 1", got)
	}
}

// figuresGate is a gate that knows first-token figures of provider "a":
// its quantiles.
type figuresGate struct {
	openGate
	quantiles map[float64]time.Duration
}

func (g figuresGate) TTFTQuantile(p, _ string, q float64) (time.Duration, bool) {
	d, ok := g.quantiles[q]
	return d, ok && p == "a"
}

// With hedge_after, the delay is the provider's quantile, never below the
// floor; first_token_sla stands in while there are no figures, and always
// without hedge_after. A model without first_token_sla is hedged at twice
// its provider's p99, at least 1s, and not while there are no figures; one
// with a negative first_token_sla never.
func TestHedgeDelayAdaptsToTheFleetsFigures(t *testing.T) {
	catalog, err := provider.NewCatalog([]provider.Config{{Name: "a", BaseURL: "http://a/v1", Models: []string{"fixed", "adaptive", "default", "off"}}},
		provider.Model{Name: "fixed", FirstTokenSLA: 800 * time.Millisecond},
		provider.Model{Name: "adaptive", FirstTokenSLA: 800 * time.Millisecond, HedgeAfter: "p95"},
		provider.Model{Name: "off", FirstTokenSLA: -1})
	if err != nil {
		t.Fatal(err)
	}
	if catalog.Hedge("off").On() {
		t.Fatal("a negative first_token_sla hedges")
	}
	a := provider.Candidate{Provider: provider.Config{Name: "a"}, Model: "m"}
	b := provider.Candidate{Provider: provider.Config{Name: "b"}, Model: "m"}
	figures := func(p95, p99 time.Duration) Gate {
		return figuresGate{quantiles: map[float64]time.Duration{0.95: p95, 0.99: p99}}
	}
	for _, tc := range []struct {
		name  string
		gate  Gate
		model string
		c     provider.Candidate
		want  time.Duration // 0: no hedge
	}{
		{"p95 known", figures(300*time.Millisecond, 0), "adaptive", a, 300 * time.Millisecond},
		{"p95 below the floor", figures(time.Millisecond, 0), "adaptive", a, provider.MinHedgeDelay},
		{"no figures of the provider", figures(300*time.Millisecond, 0), "adaptive", b, 800 * time.Millisecond},
		{"a gate without figures", openGate{}, "adaptive", a, 800 * time.Millisecond},
		{"fixed SLA", figures(300*time.Millisecond, 0), "fixed", a, 800 * time.Millisecond},
		{"default, p99 known", figures(0, 3*time.Second), "default", a, 6 * time.Second},
		{"default, p99 below the floor", figures(0, 20*time.Millisecond), "default", a, provider.DefaultHedgeFloor},
		{"default, no figures", figures(0, 3*time.Second), "default", b, 0},
	} {
		w := &Worker{gate: meteredGate{Gate: tc.gate}}
		got, ok := w.hedgeDelay(catalog.Hedge(tc.model), &tc.c)
		if !ok {
			got = 0
		}
		if got != tc.want || ok != (tc.want != 0) {
			t.Errorf("%s: delay %v (%v), want %v", tc.name, got, ok, tc.want)
		}
	}
}

// exactAnswer waits for the end of stream id and checks that its chunks
// hold the fake upstream's whole answer to content; it returns the frames
// and the chunks.
func exactAnswer(t *testing.T, h *harness, id, content string) ([]chunklog.Entry, []wire.Frame) {
	t.Helper()
	frames := h.waitEnd(id)
	text, chunks := chunkText(t, frames)
	if want := mockupstream.AnswerText(userMessages(content), 12); text != want {
		t.Fatalf("text = %q\nwant   %q", text, want)
	}
	return frames, chunks
}
