package e2e

import (
	"bytes"
	"context"
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
// instead of a raw NATS error.
func TestStorageFullRequestQueueRefusesClearly(t *testing.T) {
	sys := start(t, options{
		// One worker slot, held by a slow answer: the queue only grows.
		Mock: mockupstream.Config{Tokens: 2, TokenInterval: 30 * time.Second},
		Tune: func(c *config.Config) {
			c.Streams.Storage.Requests = 1
			c.Worker.MaxInflight = 1
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

	// Fill the queue behind it to within less than one large request.
	nc, js, err := natsconn.Connect(natsconn.Config{URL: sys.NATS.ClientURL()}, t.Name(), relaytest.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	filler := bytes.Repeat([]byte("q"), 64<<10)
	for i := 0; ; i++ {
		if _, err := js.Publish(ctx, wire.RequestSubject, filler); err != nil {
			break
		}
		if i > 32 {
			t.Fatal("RELAY_REQUESTS took 2 MiB with a 1 MiB limit")
		}
	}

	msgs, _ = prompt(strings.Repeat("a long prompt ", 20_000), 2)
	resp := send(t, ctx, http.MethodPost, sys.Edge+"/v1/chat/completions", chatBody(t, msgs, true), "",
		http.Header{"Content-Type": {"application/json"}})
	status, code, body := errorOf(t, resp)
	if status != http.StatusInsufficientStorage || code != "storage_full" {
		t.Fatalf("request into a full queue: %d %q, want 507 storage_full: %s", status, code, body)
	}
	if resp.Header.Get("Retry-After") == "" {
		t.Fatal("storage_full without a Retry-After")
	}
	if lower := strings.ToLower(body); strings.Contains(lower, "nats") || strings.Contains(lower, "bytes exceeded") {
		t.Fatalf("the refusal names internals: %s", body)
	}
}
