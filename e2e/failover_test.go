package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/relaydev/relay/e2e/procs"
	"github.com/relaydev/relay/relay/fleet"
	"github.com/relaydev/relay/relay/fleet/quota"
	"github.com/relaydev/relay/relay/mockupstream"
	"github.com/relaydev/relay/relay/wire"
)

// Failing over the way users expect, on default settings. Each fault that
// gateways are compared on meets the relay run as processes (three
// nats-servers with every stream on three replicas, a coordinator, a
// worker and an edge, every resilience setting at its default) with mock-1 falling back to mock-2, once on the
// same provider entry and once on another; the same request also goes
// straight to the provider through openai-go with its default retries.
// The test logs the comparison as the "Failover" table of BENCHMARKS.md:
//
//	go -C e2e test . -run TestProcessFailover -v

// failoverTokens is the length of every answer.
const failoverTokens = 20

// failoverWindow is mock-1's context window in tokens; a long request
// (failoverCase.long) does not fit it.
const failoverWindow = 100

// failoverCase is one fault and what the relay must make of it.
type failoverCase struct {
	name string
	// fault is a directive of the request; long makes the request longer
	// than mock-1's context window.
	fault string
	long  bool
	// answeredBy is the model that answers, "" when the client gets the
	// provider's error with status; mixed says that the content chunks
	// come from mock-1 and the model that finished.
	answeredBy string
	mixed      bool
	status     int
	// calls is how many calls the provider sees.
	calls int
	// atLeast and within bound the time to the answer: a Retry-After
	// honoured, a stall noticed.
	atLeast, within time.Duration
}

// The cases run in this order, one at a time, after a warm-up that gives
// the fleet first-token figures of mock-1 (which default hedging needs):
// the calls that fail on mock-1 are never five in a row, so its breaker
// stays closed and each case meets the defaults as a lone request would.
// A silent mock-1 may be hedged as well as left after first_token_timeout:
// either way mock-2 answers after one call of each.
var failoverCases = []failoverCase{
	{name: "503 persistent", fault: "[[mock: status=503, times=0, model=mock-1]]", answeredBy: "mock-2", calls: 5, within: 15 * time.Second},
	{name: "no [DONE]", fault: "[[mock: no_done]]", answeredBy: "mock-1", calls: 1, within: 5 * time.Second},
	{name: "reset before the headers", fault: "[[mock: reset]]", answeredBy: "mock-1", calls: 2, within: 5 * time.Second},
	{name: "500 once", fault: "[[mock: status=500]]", answeredBy: "mock-1", calls: 2, within: 5 * time.Second},
	{name: "never answers", fault: "[[mock: stall_before=5m, times=0, model=mock-1]]", answeredBy: "mock-2", calls: 2, within: 45 * time.Second},
	{name: "429 with Retry-After: 2", fault: "[[mock: status=429, retry_after=2]]", answeredBy: "mock-1", calls: 2, atLeast: 2 * time.Second, within: 10 * time.Second},
	{name: "429 without Retry-After", fault: "[[mock: status=429]]", answeredBy: "mock-1", calls: 2, within: 5 * time.Second},
	{name: "cut mid-answer", fault: "[[mock: cut_after=5]]", answeredBy: "mock-1", calls: 2, within: 5 * time.Second},
	// Keep-alive comments every 3 s keep the bytes flowing: the content
	// stall bound (30 s) notices.
	{name: "stalled mid-answer, keep-alives every 3 s", fault: "[[mock: stall_after=5, stall_for=50s]]", answeredBy: "mock-1", calls: 2, atLeast: 30 * time.Second, within: 40 * time.Second},
	{name: "malformed chunk", fault: "[[mock: malformed_after=5]]", answeredBy: "mock-1", calls: 2, within: 5 * time.Second},
	// mock-1 is cut after every third token; after its retries mock-2,
	// which takes no prefill, continues in prompt mode.
	{name: "cut on every call; the fallback refuses prefill", fault: "[[mock: cut_after=3, times=0, model=mock-1]]", answeredBy: "mock-2", mixed: true, calls: 6, within: 15 * time.Second},
	{name: "400 context_length_exceeded", long: true, answeredBy: "mock-2", calls: 2, within: 5 * time.Second},
	{name: "400 other (a refusal)", fault: "[[mock: status=400, times=0]]", status: http.StatusBadRequest, calls: 1, within: 5 * time.Second},
	// Far slower than mock-1's recent first tokens: hedged onto mock-2,
	// which answers first.
	{name: "first token after 25 s", fault: "[[mock: first_token_after=25s, times=0, model=mock-1]]", answeredBy: "mock-2", calls: 2, within: 10 * time.Second},
}

// The prices of the two models, per million tokens: a fallback's answer
// costs mock-2's.
var failoverModels = []map[string]any{
	{"name": "mock-1", "fallbacks": []map[string]any{{"model": "mock-2"}}, "price": map[string]any{"input_per_mtok": 2, "output_per_mtok": 8}},
	{"name": "mock-2", "price": map[string]any{"input_per_mtok": 0.1, "output_per_mtok": 0.42}},
}

func TestProcessFailover(t *testing.T) {
	topologies := []struct {
		name, primary string
		providers     func(mock procs.Provider) []procs.Provider
	}{
		{"same entry", "mock", func(mock procs.Provider) []procs.Provider { return []procs.Provider{mock} }},
		{"another entry", "primary", func(mock procs.Provider) []procs.Provider {
			primary, fallback := mock, mock
			primary.Name, primary.Models = "primary", []string{"mock-1"}
			fallback.Name, fallback.Models = "fallback", []string{"mock-2"}
			return []procs.Provider{primary, fallback}
		}},
	}
	// Each column has a row per case, then the outage's.
	results := make([][]string, len(topologies)+1)
	var directOutage string
	var wg sync.WaitGroup
	for i, top := range topologies {
		s := start(t, options{Processes: true, ClusterNodes: 3, Coordinator: true, ProvidersOf: top.providers,
			Settings: procs.Settings{"models": failoverModels},
			Mock: mockupstream.Config{Tokens: failoverTokens, TokenInterval: 5 * time.Millisecond, CommentInterval: 3 * time.Second,
				ContextWindows: map[string]int{"mock-1": failoverWindow}, NoPrefill: []string{"mock-2"}},
		})
		if i == 0 {
			// The direct client meets the same fake upstream, in
			// parallel with the relay's cases: it can take minutes.
			wg.Go(func() { results[len(topologies)] = s.failoverDirect(t) })
		}
		wg.Go(func() {
			if !s.warmUp(t, top.primary+"/mock-1") {
				for range len(failoverCases) + 1 {
					results[i] = append(results[i], "not run: the warm-up failed")
				}
				return
			}
			for _, c := range failoverCases {
				results[i] = append(results[i], s.failover(t, top.name, c))
			}
			relay, direct := s.failoverOutage(t, top.name, i == 0)
			results[i] = append(results[i], relay)
			if i == 0 {
				directOutage = direct
			}
		})
	}
	wg.Wait()
	results[len(topologies)] = append(results[len(topologies)], directOutage)
	var table strings.Builder
	table.WriteString("| fault | relay, fallback on the same entry | relay, fallback on another entry | openai-go, direct |\n|---|---|---|---|\n")
	names := make([]string, 0, len(failoverCases)+1)
	for _, c := range failoverCases {
		names = append(names, c.name)
	}
	names = append(names, fmt.Sprintf("mock-1 down %v, then back; %d requests, one a second", outageFor, outageRequests))
	for k, name := range names {
		fmt.Fprintf(&table, "| %s | %s | %s | %s |\n", name, results[0][k], results[1][k], results[2][k])
	}
	t.Logf("failover on default settings:\n%s", table.String())
}

// The outage: mock-1 answers every call with 503 for outageFor while
// outageRequests requests start a second apart.
const (
	outageFor      = 5 * time.Second
	outageRequests = 20
)

// failoverOutage takes mock-1 down for outageFor while outageRequests
// requests start a second apart through the relay, and, with direct, as
// many straight to the provider through openai-go; it checks that the
// relay answered every one exactly, on mock-2 while mock-1 was down and on
// mock-1 again once it was back, and says what each client got.
func (s *system) failoverOutage(t *testing.T, topology string, direct bool) (relayRun, directRun string) {
	if err := s.putFaults("status=503, times=0, model=mock-1"); err != nil {
		t.Error(err)
		return "**failed**: " + err.Error(), ""
	}
	back := time.AfterFunc(outageFor, func() {
		if err := s.putFaults(""); err != nil {
			t.Error(err)
		}
	})
	defer back.Stop()
	client := openai.NewClient(option.WithBaseURL(s.mockURL()+"/v1/"), option.WithAPIKey("direct"))
	answers := make([]chatAnswer, outageRequests)
	errs := make([]error, outageRequests)
	directRes := &runResult{}
	var wg sync.WaitGroup
	for i := range outageRequests {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			msgs, want := prompt(fmt.Sprintf("Outage %d, %s.", i, topology), failoverTokens)
			answers[i], errs[i] = streamChat(ctx, s.Edge, msgs)
			if errs[i] == nil && (answers[i].text != want || answers[i].status != "done") {
				errs[i] = fmt.Errorf("%q, status %q", answers[i].text, answers[i].status)
			}
		})
		if direct {
			wg.Go(func() {
				msgs, want := prompt(fmt.Sprintf("Outage %d, direct.", i), failoverTokens)
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				got, _, err := directCall(ctx, &client, msgs)
				if err == nil && got != want {
					err = fmt.Errorf("a wrong answer: %q", got)
				}
				directRes.add(err)
			})
		}
		time.Sleep(time.Second)
	}
	wg.Wait()
	exact, byFallback, backFrom := 0, 0, -1
	for i, a := range answers {
		switch {
		case errs[i] != nil:
			t.Errorf("%s, outage: request %d: %v", topology, i, errs[i])
			continue
		case a.model == "mock-2":
			byFallback++
			backFrom = -1
		case backFrom < 0:
			backFrom = i
		}
		exact++
	}
	// The breaker's probe finds mock-1 back at most a cooldown after the
	// outage: the last requests are mock-1's again.
	if backFrom < 0 || backFrom > outageRequests-3 {
		t.Errorf("%s, outage: mock-1 answered again from request %d of %d, want the last ones back on it", topology, backFrom, outageRequests)
	}
	relayRun = fmt.Sprintf("%d/%d exact; %d by mock-2, mock-1 again from request %d", exact, outageRequests, byFallback, backFrom+1)
	if direct {
		directRun = fmt.Sprintf("%d/%d exact", directRes.exact, directRes.total)
	}
	return relayRun, directRun
}

// putFaults sets the fake upstream's server-wide faults.
func (s *system) putFaults(spec string) error {
	return s.putMock("/mock/faults", map[string]string{"faults": spec})
}

// warmUp sends requests until the fleet has first-token figures of target
// ("provider/model"), as the coordinator publishes them, and reports
// whether it does.
func (s *system) warmUp(t *testing.T, target string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	js, err := jetstream.New(s.nc)
	if err != nil {
		t.Error(err)
		return false
	}
	kv, err := js.KeyValue(ctx, wire.QuotaBucket)
	if err != nil {
		t.Error(err)
		return false
	}
	for i := 0; ctx.Err() == nil; i++ {
		if i >= quota.MinTTFTSamples {
			if e, err := kv.Get(ctx, fleet.TTFTKey); err == nil {
				var f quota.TTFTFigures
				if json.Unmarshal(e.Value(), &f) == nil && f.Targets[target].N >= quota.MinTTFTSamples {
					return true
				}
			}
		}
		msgs, want := prompt(fmt.Sprintf("Warm-up %d.", i), failoverTokens)
		if got, err := streamChat(ctx, s.Edge, msgs); err != nil || got.text != want {
			t.Errorf("warm-up %d: %q, %v", i, got.text, err)
			return false
		}
	}
	t.Errorf("no first-token figures of %s after a minute of warm-up", target)
	return false
}

// failoverMessages is the conversation of case c, told apart by who asks.
func failoverMessages(c failoverCase, who string) ([]mockupstream.Message, string) {
	text := fmt.Sprintf("%s Failover: %s, %s.", c.fault, c.name, who)
	if c.long {
		text += strings.Repeat(" A long question that does not fit.", failoverWindow/6)
	}
	return prompt(text, failoverTokens)
}

// failover runs case c through the relay, checks what the client got, and
// says it for the table.
func (s *system) failover(t *testing.T, topology string, c failoverCase) string {
	msgs, want := failoverMessages(c, topology)
	ctx, cancel := context.WithTimeout(context.Background(), 2*c.within+10*time.Second)
	defer cancel()
	began := time.Now()
	got, err := streamChat(ctx, s.Edge, msgs)
	took := time.Since(began)
	calls := s.mockStats().ByConversation[mockupstream.ConversationKey(msgs)]
	fail := func(format string, args ...any) string {
		t.Errorf("%s, %s: "+format, append([]any{topology, c.name}, args...)...)
		return "**failed**: " + fmt.Sprintf(format, args...)
	}
	switch {
	case c.answeredBy == "":
		var he *httpError
		if !errors.As(err, &he) || he.Status != c.status || !strings.Contains(he.Body, "injected fault") {
			return fail("got %v, want the provider's %d with its message", err, c.status)
		}
	case err != nil:
		return fail("%v", err)
	case got.text != want || got.finish != "stop" || got.status != "done":
		return fail("%q, finish %q, status %q; want the whole answer, done", got.text, got.finish, got.status)
	case got.model != c.answeredBy || got.chunkModels != c.answeredBy && !c.mixed:
		return fail("the final chunk names %q and the content chunks %q, want %q, the model that answered", got.model, got.chunkModels, c.answeredBy)
	case c.mixed && got.chunkModels != "mixed":
		return fail("the content chunks name %q, want mock-1 and %s, the models that wrote them", got.chunkModels, c.answeredBy)
	case (c.answeredBy != "mock-1") != (got.requested == "mock-1"):
		return fail("relay.requested_model %q with %s answering", got.requested, c.answeredBy)
	case got.usage == nil:
		return fail("no usage")
	}
	if c.answeredBy == "mock-2" && !c.mixed {
		// Nothing of mock-1 reached the answer: it costs mock-2's price.
		cost := (0.1*float64(got.usage.PromptTokens) + 0.42*float64(got.usage.CompletionTokens)) / 1e6
		if math.Abs(got.cost-cost) > 1e-12 {
			return fail("cost %v, want mock-2's %v for %+v", got.cost, cost, *got.usage)
		}
	}
	if calls != c.calls {
		return fail("the provider saw %d calls, want %d", calls, c.calls)
	}
	if took < c.atLeast || took > c.within {
		return fail("answered in %v, want between %v and %v", took.Round(time.Millisecond), c.atLeast, c.within)
	}
	if c.answeredBy == "" {
		return fmt.Sprintf("%d, the provider's message, %s", c.status, callsOf(calls))
	}
	return fmt.Sprintf("exact, by %s, %s, %.1f s", c.answeredBy, callsOf(calls), took.Seconds())
}

// callsOf says n calls.
func callsOf(n int) string {
	if n == 1 {
		return "1 call"
	}
	return fmt.Sprintf("%d calls", n)
}

// chatAnswer is what a streamed chat completion told its client.
type chatAnswer struct {
	text, finish, status string
	// model is the final chunk's; chunkModels the content chunks' if they
	// all agree, else "mixed".
	model, chunkModels, requested string
	usage                         *wire.Usage
	cost                          float64
}

// streamChat streams a chat completion of msgs for mock-1 from edge, to
// its [DONE].
func streamChat(ctx context.Context, edge string, msgs []mockupstream.Message) (chatAnswer, error) {
	body, _ := json.Marshal(map[string]any{"model": "mock-1", "stream": true, "stream_options": map[string]any{"include_usage": true}, "messages": msgs})
	st, err := openSSE(ctx, http.MethodPost, edge+"/v1/chat/completions", body, "")
	if err != nil {
		return chatAnswer{}, err
	}
	defer st.Close()
	var a chatAnswer
	var text strings.Builder
	for {
		ev, err := st.Next()
		if err != nil {
			return a, fmt.Errorf("the stream ended without [DONE]: %w", err)
		}
		if ev.Data == "[DONE]" {
			a.text = text.String()
			return a, nil
		}
		var c chunkJSON
		if err := json.Unmarshal([]byte(ev.Data), &c); err != nil {
			return a, err
		}
		if c.Error != nil {
			return a, fmt.Errorf("error event: %s", c.Error.Message)
		}
		for _, ch := range c.Choices {
			if ch.Delta.Content != "" {
				text.WriteString(ch.Delta.Content)
				switch a.chunkModels {
				case "", c.Model:
					a.chunkModels = c.Model
				default:
					a.chunkModels = "mixed"
				}
			}
			if ch.FinishReason != nil {
				a.finish, a.model, a.status, a.usage, a.cost = *ch.FinishReason, c.Model, c.Relay.Status, c.Usage, c.Relay.Cost
				a.requested = c.Relay.RequestedModel
			}
		}
	}
}

// failoverDirect runs every case straight against the fake upstream with
// openai-go and its default retries, all at once, and says what each got.
// It only reports: a direct client has no fallback to fail over to.
func (s *system) failoverDirect(t *testing.T) []string {
	client := openai.NewClient(option.WithBaseURL(s.mockURL()+"/v1/"), option.WithAPIKey("direct"))
	out := make([]string, len(failoverCases))
	var wg sync.WaitGroup
	for k, c := range failoverCases {
		wg.Go(func() {
			msgs, want := failoverMessages(c, "direct")
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			began := time.Now()
			got, _, err := directCall(ctx, &client, msgs)
			took := time.Since(began).Seconds()
			calls := s.mockStats().ByConversation[mockupstream.ConversationKey(msgs)]
			var apiErr *openai.Error
			switch {
			case errors.Is(err, context.DeadlineExceeded):
				out[k] = fmt.Sprintf("nothing after %.0f s, %s", took, callsOf(calls))
			case errors.As(err, &apiErr):
				out[k] = fmt.Sprintf("error %d after %.1f s, %s", apiErr.StatusCode, took, callsOf(calls))
			case err != nil:
				out[k] = fmt.Sprintf("a broken stream after %.1f s, %s: %d of %d characters", took, callsOf(calls), len(got), len(want))
			case got != want:
				out[k] = fmt.Sprintf("a wrong answer after %.1f s, %s", took, callsOf(calls))
			default:
				out[k] = fmt.Sprintf("exact, %s, %.1f s", callsOf(calls), took)
			}
		})
	}
	wg.Wait()
	return out
}
