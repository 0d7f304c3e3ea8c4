package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/relaydev/relay/relay/config"
	"github.com/relaydev/relay/relay/mockupstream"
	"github.com/relaydev/relay/relay/natsconn"
	"github.com/relaydev/relay/relay/relaytest"
	"github.com/relaydev/relay/relay/wire"
)

// RELAY_REQUESTS has a byte limit (streams.storage_mib.requests), so a
// backlog cannot fill the server's disk; a request that does not fit is
// refused with an OpenAI error that says the relay's storage is full (507
// storage_full, with a Retry-After), in words that name no internals,
// instead of a raw NATS error. So is one whose Idempotency-Key finds the
// idempotency bucket full.
func TestStorageFullRequestQueueRefusesClearly(t *testing.T) {
	sys := start(t, options{
		// One worker slot, held by a slow answer: the queue only grows.
		Mock: mockupstream.Config{Tokens: 2, TokenInterval: 30 * time.Second},
		Tune: func(c *config.Config) {
			c.Streams.Storage.Requests = 1
			c.Streams.Storage.Idempotency = 1
			c.Worker.MaxInflight = 1
			// Without heartbeats the edges do not share the slots between
			// tenants (edge/admit_tenant_gate.go), which would keep the second
			// request waiting at the edge for the slot instead of queueing
			// it behind the held one.
			c.Worker.HeartbeatInterval = -1
			quickStop(c)
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	msgs, _ := prompt("Hold the only worker slot.", 2)
	held, err := openSSE(ctx, http.MethodPost, sys.Edge+"/v1/chat/completions", chatBody(t, msgs, true), "")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()

	nc, js, err := natsconn.Connect(natsconn.Config{URL: sys.NATS.ClientURL()}, t.Name(), relaytest.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	// fill publishes ever smaller messages until even 16 bytes do not
	// fit, so that no request or record fits after it.
	n := 0
	fill := func(what string, subject func(i int) string) {
		for _, size := range []int{64 << 10, 4 << 10, 256, 16} {
			filler := bytes.Repeat([]byte("q"), size)
			for ; ; n++ {
				if _, err := js.Publish(ctx, subject(n), filler); err != nil {
					break
				}
				if n > 1000 {
					t.Fatalf("%s took 1,000 messages with a 1 MiB limit", what)
				}
			}
		}
	}
	refused := func(what string, body []byte, h http.Header) {
		t.Helper()
		h.Set("Content-Type", "application/json")
		resp := send(t, ctx, http.MethodPost, sys.Edge+"/v1/chat/completions", body, "", h)
		status, code, text := errorOf(t, resp)
		if status != http.StatusInsufficientStorage || code != "storage_full" {
			t.Fatalf("%s: %d %q, want 507 storage_full: %s", what, status, code, text)
		}
		if resp.Header.Get("Retry-After") == "" {
			t.Fatalf("%s: storage_full without a Retry-After", what)
		}
		if lower := strings.ToLower(text); strings.Contains(lower, "nats") || strings.Contains(lower, "bytes exceeded") {
			t.Fatalf("%s: the refusal names internals: %s", what, text)
		}
	}

	fill("relay_idempotency", func(i int) string { return fmt.Sprintf("$KV.%s.filler%d", wire.IdempotencyBucket, i) })
	msgs, _ = prompt("Once only.", 2)
	refused("a request whose Idempotency-Key finds the bucket full", chatBody(t, msgs, true), http.Header{"Idempotency-Key": {"once-only"}})

	// Fill the queue behind the held request.
	fill(wire.RequestStream, func(int) string { return wire.RequestSubject })
	msgs, _ = prompt("No room left.", 2)
	refused("a request into a full queue", chatBody(t, msgs, true), http.Header{})
}
