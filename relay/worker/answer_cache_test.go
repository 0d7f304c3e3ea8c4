package worker

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/relay/fleet"
	"github.com/relaydev/relay/relay/mockupstream"
	"github.com/relaydev/relay/relay/provider"
	"github.com/relaydev/relay/relay/relaytest"
	"github.com/relaydev/relay/relay/wire"
)

// submitAs queues a request of tenant for mock-1 with body, as an edge
// does, and returns its stream id.
func (h *harness) submitAs(tenant string, body map[string]any) string {
	h.t.Helper()
	id := wire.NewStreamID()
	b, _ := json.Marshal(body)
	data, _ := json.Marshal(wire.Request{StreamID: id, Tenant: tenant, Model: "mock-1", Body: b, Created: time.Now().Unix()})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := h.js.Publish(ctx, wire.RequestSubject, data, jetstream.WithMsgID(id)); err != nil {
		h.t.Fatalf("submit: %v", err)
	}
	return id
}

// waitKept waits until an answer is kept for tenant's request body.
func (h *harness) waitKept(tenant string, body map[string]any) wire.CachedAnswer {
	h.t.Helper()
	b, _ := json.Marshal(body)
	key, err := answerKey(tenant, "mock-1", b)
	if err != nil {
		h.t.Fatal(err)
	}
	kv, err := h.js.KeyValue(context.Background(), wire.AnswerBucket)
	if err != nil {
		h.t.Fatal(err)
	}
	var a wire.CachedAnswer
	relaytest.Eventually(h.t, waitFor, 5*time.Millisecond, func() bool {
		e, err := kv.Get(context.Background(), key)
		return err == nil && json.Unmarshal(e.Value(), &a) == nil
	})
	return a
}

// cachedText checks that every chunk and the end are marked cached and the
// stream ended done, and returns the text.
func cachedText(t *testing.T, h *harness, id string) string {
	t.Helper()
	frames := h.waitEnd(id)
	text, chunks := chunkText(t, frames)
	if end := endOf(frames); end.Status != wire.StatusDone || !end.Cached || end.FinishReason != "stop" || end.Usage == nil {
		t.Fatalf("end %+v: want done, cached, stop, with the kept usage", end)
	}
	for _, c := range chunks {
		if !c.Cached {
			t.Fatalf("chunk %d is not marked cached", c.Seq)
		}
	}
	return text
}

// With a fallback cache, an answer that completed is kept; when no
// provider can take the same request of the same tenant later (sent
// streamed this time), it is answered from the cache, marked, without a
// call. Another tenant's identical request and a different request fail
// as before.
func TestFallbackAnswersFromTheCache(t *testing.T) {
	gate := &recordingGate{}
	h := start(t, setup{mock: mockupstream.Config{Tokens: 6, TokenInterval: -1}, gate: gate,
		models: []provider.Model{{Name: "mock-1", Cache: provider.Cache{Mode: provider.CacheFallback}}}})
	body := func(stream bool, content string) map[string]any {
		return map[string]any{"model": "mock-1", "messages": userMessages(content), "stream": stream}
	}
	first := h.submitAs("acme", body(false, "Remember me."))
	fresh, _ := chunkText(t, h.waitEnd(first))
	if end := endOf(h.frames(first)); end.Status != wire.StatusDone || end.Cached {
		t.Fatalf("first answer ended %+v", end)
	}
	if kept := h.waitKept("acme", body(false, "Remember me.")); kept.StreamID != first || kept.FinishReason != "stop" {
		t.Fatalf("kept %+v", kept)
	}

	gate.mu.Lock()
	gate.refuse = map[string]bool{"mock": true}
	gate.mu.Unlock()
	calls := h.mock.Stats().ChatRequests
	if got := cachedText(t, h, h.submitAs("acme", body(true, "Remember me."))); got != fresh {
		t.Fatalf("answered %q from the cache, the provider said %q", got, fresh)
	}
	for name, id := range map[string]string{
		"another tenant":  h.submitAs("beta", body(false, "Remember me.")),
		"another request": h.submitAs("acme", body(false, "Forget me.")),
	} {
		end := endOf(h.waitEnd(id))
		if end.Status != wire.StatusFailed || end.Cached || end.Error == nil || end.Error.Status != http.StatusServiceUnavailable {
			t.Errorf("%s: end %+v, error %+v; want failed with 503, not cached", name, end, end.Error)
		}
	}
	if n := h.mock.Stats().ChatRequests; n != calls {
		t.Errorf("%d calls reached the provider while the gate refused it", n-calls)
	}
}

// With a prefer cache, a deterministic request (temperature 0) kept once
// is answered from the cache without calling the provider; one that
// samples is not.
func TestPreferAnswersDeterministicRequestsFromTheCache(t *testing.T) {
	h := start(t, setup{mock: mockupstream.Config{Tokens: 4, TokenInterval: -1},
		models: []provider.Model{{Name: "mock-1", Cache: provider.Cache{Mode: provider.CachePrefer, TTL: time.Hour}}}})
	body := func(temperature float64) map[string]any {
		return map[string]any{"model": "mock-1", "messages": userMessages("Twice."), "temperature": temperature}
	}
	fresh, _ := chunkText(t, h.waitEnd(h.submitAs("acme", body(0))))
	h.waitKept("acme", body(0))
	calls := h.mock.Stats().ChatRequests
	if got := cachedText(t, h, h.submitAs("acme", body(0))); got != fresh {
		t.Fatalf("answered %q from the cache, the provider said %q", got, fresh)
	}
	if n := h.mock.Stats().ChatRequests; n != calls {
		t.Fatalf("%d calls for a request the cache answers", n-calls)
	}
	sampled := endOf(h.waitEnd(h.submitAs("acme", body(0.7))))
	if sampled.Status != wire.StatusDone || sampled.Cached || h.mock.Stats().ChatRequests != calls+1 {
		t.Fatalf("a sampling request: end %+v after %d calls, want done, not cached, after one call", sampled, h.mock.Stats().ChatRequests-calls)
	}
}

// downGate is a provider that is down, as a SharedGate sees one with an
// open breaker: a call that has no alternative waits for the probe (here
// until its context ends); one with an alternative, or that asked to fail
// fast, is refused at once.
type downGate struct {
	mu     sync.Mutex
	waited int
}

func (g *downGate) Admit(ctx context.Context, provider, model string) (fleet.Ticket, error) {
	refused := &fleet.UnavailableError{Provider: provider, Model: model, Cause: fleet.ErrProviderOpen}
	if info := fleet.CallInfoFrom(ctx); info.FailFast || info.Alternatives > 0 {
		return nil, refused
	}
	g.mu.Lock()
	g.waited++
	g.mu.Unlock()
	<-ctx.Done()
	return nil, ctx.Err()
}

// A request with a kept answer whose provider is down is answered from the
// cache at once, whether it asked to fail fast or not: it never waits for
// the breaker's probe.
func TestKeptAnswerComesAtOnceWhenTheRouteIsDown(t *testing.T) {
	gate := &switchGate{}
	h := start(t, setup{mock: mockupstream.Config{Tokens: 6, TokenInterval: -1}, gate: gate,
		models: []provider.Model{{Name: "mock-1", Cache: provider.Cache{Mode: provider.CacheFallback}}}})
	body := map[string]any{"model": "mock-1", "messages": userMessages("Keep me."), "stream": true}
	fresh, _ := chunkText(t, h.waitEnd(h.submitAs("acme", body)))
	h.waitKept("acme", body)

	down := &downGate{}
	gate.set(down)
	for _, failFast := range []bool{false, true} {
		id := wire.NewStreamID()
		b, _ := json.Marshal(body)
		data, _ := json.Marshal(wire.Request{StreamID: id, Tenant: "acme", Model: "mock-1", Body: b, Created: time.Now().Unix(), FailFast: failFast})
		if _, err := h.js.Publish(t.Context(), wire.RequestSubject, data, jetstream.WithMsgID(id)); err != nil {
			t.Fatal(err)
		}
		if got := cachedText(t, h, id); got != fresh {
			t.Fatalf("fail fast %v: answered %q from the cache, the provider said %q", failFast, got, fresh)
		}
	}
	down.mu.Lock()
	defer down.mu.Unlock()
	if down.waited != 0 {
		t.Fatalf("%d calls waited for the provider that was down", down.waited)
	}
}

// switchGate is the gate it was last set to, an open one until then.
type switchGate struct {
	mu sync.Mutex
	g  Gate
}

func (s *switchGate) set(g Gate) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.g = g
}

func (s *switchGate) Admit(ctx context.Context, provider, model string) (fleet.Ticket, error) {
	s.mu.Lock()
	g := s.g
	s.mu.Unlock()
	if g == nil {
		return fleet.NoTicket{}, nil
	}
	return g.Admit(ctx, provider, model)
}
