package e2e

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/relaydev/relay/edge"
	"github.com/relaydev/relay/relay/mockupstream"
)

// Identical POSTs with one Idempotency-Key, racing on two edges, start one
// generation (one upstream call); a replay after the end attaches to the
// finished stream; the key with another body gets 409 and no call.
func TestFrontDoorIdempotency(t *testing.T) {
	const tokens = 30
	sys := start(t, options{Edges: 2, Mock: mockupstream.Config{Tokens: tokens, TokenInterval: 5 * time.Millisecond}, Tune: withTenants(nil)})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	msgs, want := prompt("Charge me once.", tokens)
	body := chatBody(t, msgs, true)
	key := http.Header{edge.HeaderIdempotencyKey: {"order-7f3e"}}

	const racers = 8
	ids := make([]string, racers)
	texts := make([]string, racers)
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for i := range racers {
		wg.Go(func() {
			<-gate
			resp := send(t, ctx, "POST", sys.Edges[i%2]+"/v1/chat/completions", body, keyAcme, key)
			ids[i] = resp.Header.Get("X-Relay-Stream-Id")
			tr := &transcript{}
			if resp.StatusCode != http.StatusOK {
				t.Errorf("racer %d: status %d", i, resp.StatusCode)
				return
			}
			if err := tr.readUntil(sseOf(resp), 0); err != nil {
				t.Errorf("racer %d: %v", i, err)
				return
			}
			texts[i] = tr.text.String()
		})
	}
	close(gate)
	wg.Wait()
	for i := range racers {
		if ids[i] != ids[0] || texts[i] != want {
			t.Fatalf("racer %d: stream %s (first %s), text %q", i, ids[i], ids[0], texts[i])
		}
	}
	if n := calls(sys, msgs); n != 1 {
		t.Fatalf("%d upstream calls for %d identical requests", n, racers)
	}

	// After the end: the same stream, replayed whole.
	resp := send(t, ctx, "POST", sys.Edges[1]+"/v1/chat/completions", body, keyAcme, key)
	if resp.Header.Get("X-Relay-Stream-Id") != ids[0] || resp.Header.Get(edge.HeaderIdempotentReplayed) != "true" {
		t.Fatalf("replay after the end: stream %q, replayed %q", resp.Header.Get("X-Relay-Stream-Id"), resp.Header.Get(edge.HeaderIdempotentReplayed))
	}
	if tr := transcriptOf(t, resp, nil, 0); tr.text.String() != want || tr.status != "done" {
		t.Fatalf("replayed text %q", tr.text.String())
	}

	// The key with another body: 409, nothing started.
	other, _ := prompt("Charge me twice.", tokens)
	status, code, raw := errorOf(t, send(t, ctx, "POST", sys.Edges[0]+"/v1/chat/completions", chatBody(t, other, true), keyAcme, key))
	if status != http.StatusConflict || code != edge.CodeIdempotencyKeyReused {
		t.Fatalf("another body: %d %s", status, raw)
	}
	// X-Request-Id works the same.
	rid := http.Header{edge.HeaderRequestID: {"req-42"}}
	plain, _ := prompt("Plain request.", tokens)
	a := send(t, ctx, "POST", sys.Edges[0]+"/v1/chat/completions", chatBody(t, plain, false), keyAcme, rid)
	b := send(t, ctx, "POST", sys.Edges[1]+"/v1/chat/completions", chatBody(t, plain, false), keyAcme, rid)
	if a.StatusCode != http.StatusOK || a.Header.Get("X-Relay-Stream-Id") != b.Header.Get("X-Relay-Stream-Id") {
		t.Fatalf("X-Request-Id: %d, streams %q %q", a.StatusCode, a.Header.Get("X-Relay-Stream-Id"), b.Header.Get("X-Relay-Stream-Id"))
	}
	if n := calls(sys, msgs) + calls(sys, other) + calls(sys, plain); n != 2 {
		t.Fatalf("%d upstream calls in all, want 2", n)
	}
}
