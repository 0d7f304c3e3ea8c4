package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/relaydev/relay/relay/config"
	"github.com/relaydev/relay/relay/fleet/breaker"
	"github.com/relaydev/relay/relay/mockupstream"
	"github.com/relaydev/relay/relay/provider"
	"github.com/relaydev/relay/relay/relaytest"
	"github.com/relaydev/relay/relay/wire"
)

// cachedJSON is the part of a chat.completion, a chunk or an error body
// the cache test looks at.
type cachedJSON struct {
	Choices []struct {
		Message struct {
			Content string `json:"content"`
		} `json:"message"`
		Delta struct {
			Content string `json:"content"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Error *struct {
		Code string `json:"code"`
	} `json:"error"`
	Relay struct {
		Status string `json:"status"`
	} `json:"relay"`
}

// A model whose cache is on keeps each completed answer for its tenant.
// When its provider is down (every call a 503), the same request of the
// same tenant, whole or streamed, asking to fail fast or not, is answered
// from the cache at once and says so: X-Relay-Cache: hit, relay.status
// "cached" in the completion and in every chunk; none waits for the open
// breaker's probe (breaker.max_wait, 1 m by default). Another tenant's
// identical request, and a different request of the same tenant, fail as
// they would without a cache (here at once, asking to fail fast). The
// roles run under the shipped NATS users, so the worker's grants on
// relay_answers are proven too.
func TestCachedAnswerWhenTheProviderIsDown(t *testing.T) {
	const tokens = 5
	c := start(t, options{Secured: true, Mock: mockupstream.Config{Tokens: tokens, TokenInterval: time.Millisecond},
		Tune: withTenants(withFastRetry(func(cfg *config.Config) {
			cfg.Models = []provider.Model{{Name: "mock-2", Cache: provider.Cache{Mode: provider.CacheFallback, TTL: time.Hour}}}
		}))})
	// Far below breaker.max_wait: what a request that waited for the
	// probe would take.
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	failFast := http.Header{"X-Relay-Fail-Fast": {"true"}}
	askWith := func(key, content string, stream bool, h http.Header) *http.Response {
		body, _ := json.Marshal(map[string]any{"model": "mock-2", "stream": stream,
			"messages": []mockupstream.Message{{Role: "user", Content: content}}})
		return send(t, ctx, http.MethodPost, c.Edge+"/v1/chat/completions", body, key, h)
	}
	ask := func(key, content string, stream bool) *http.Response { return askWith(key, content, stream, nil) }
	whole := func(res *http.Response) cachedJSON {
		t.Helper()
		b, err := io.ReadAll(res.Body)
		if err != nil {
			t.Fatal(err)
		}
		var v cachedJSON
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatalf("%d %s: %v", res.StatusCode, b, err)
		}
		return v
	}
	const content = "Keep this answer."
	want := answerText(content, tokens)

	res := ask(keyAcme, content, false)
	if got := whole(res); res.StatusCode != http.StatusOK || got.Choices[0].Message.Content != want ||
		got.Relay.Status != string(wire.StatusDone) || res.Header.Get("X-Relay-Cache") != "" {
		t.Fatalf("fresh answer: %d, X-Relay-Cache %q, %+v", res.StatusCode, res.Header.Get("X-Relay-Cache"), got)
	}
	// The worker keeps the answer after the stream's end: wait for it.
	answers := c.Secured.probe(t, "worker")
	relaytest.Eventually(t, 10*time.Second, 10*time.Millisecond, func() bool {
		s, err := answers.js.Stream(ctx, "KV_"+wire.AnswerBucket)
		if err != nil {
			return false
		}
		info, err := s.Info(ctx)
		return err == nil && info.State.Msgs == 1
	})

	c.fronts["mock"].down.Store(true)

	res = ask(keyAcme, content, false)
	if got := whole(res); res.StatusCode != http.StatusOK || got.Choices[0].Message.Content != want ||
		got.Choices[0].FinishReason == nil || got.Relay.Status != "cached" || res.Header.Get("X-Relay-Cache") != "hit" {
		t.Fatalf("whole answer while down: %d, X-Relay-Cache %q, %+v", res.StatusCode, res.Header.Get("X-Relay-Cache"), got)
	}

	// The calls of that request opened the breaker: the edge would
	// refuse a request that asks to fail fast, but for the cache.
	breakers, err := answers.js.KeyValue(ctx, wire.BreakerBucket)
	must(t, err)
	relaytest.Eventually(t, 10*time.Second, 10*time.Millisecond, func() bool {
		e, err := breakers.Get(ctx, wire.ScopeKey("mock", "mock-2"))
		var b breaker.State
		return err == nil && json.Unmarshal(e.Value(), &b) == nil && b.Phase == breaker.Open
	})
	res = askWith(keyAcme, content, false, failFast)
	if got := whole(res); res.StatusCode != http.StatusOK || got.Choices[0].Message.Content != want || got.Relay.Status != "cached" {
		t.Fatalf("fail-fast answer while down: %d, %+v; want the kept answer", res.StatusCode, got)
	}

	res = ask(keyAcme, content, true)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("streamed answer while down: %d", res.StatusCode)
	}
	var text strings.Builder
	events := 0
	for s := sseOf(res); ; {
		ev, err := s.Next()
		if err != nil {
			t.Fatalf("streamed answer while down, after %d events: %v", events, err)
		}
		if ev.Data == "[DONE]" {
			break
		}
		events++
		var chunk cachedJSON
		if err := json.Unmarshal([]byte(ev.Data), &chunk); err != nil {
			t.Fatal(err)
		}
		if chunk.Relay.Status != "cached" || chunk.Error != nil {
			t.Fatalf("event %s: %s; want relay.status cached", ev.ID, ev.Data)
		}
		text.WriteString(chunk.Choices[0].Delta.Content)
	}
	if text.String() != want {
		t.Fatalf("streamed %q from the cache, want %q", text.String(), want)
	}

	for name, res := range map[string]*http.Response{
		"another tenant":  askWith(keyBeta, content, false, failFast),
		"another request": askWith(keyAcme, "Do not keep this one.", false, failFast),
	} {
		got := whole(res)
		if res.StatusCode < 500 || got.Error == nil || got.Relay.Status != string(wire.StatusFailed) || res.Header.Get("X-Relay-Cache") != "" {
			t.Errorf("%s while down: %d, X-Relay-Cache %q, %+v; want the usual failure", name, res.StatusCode, res.Header.Get("X-Relay-Cache"), got)
		}
	}
}
