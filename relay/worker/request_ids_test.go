package worker

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/relay/mockupstream"
	"github.com/relaydev/relay/relay/wire"
)

// TestCallsCarryRequestIDs: every call of a stream, the continuation of a
// cut answer too, tells the provider the stream and the client's request
// id (provider request_headers' defaults).
func TestCallsCarryRequestIDs(t *testing.T) {
	var mu sync.Mutex
	var seen []http.Header
	h := start(t, setup{
		mock: mockupstream.Config{Tokens: 20, TokenInterval: -1},
		wrap: func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method != http.MethodPost {
					next.ServeHTTP(w, r) // the worker's key checks
					return
				}
				mu.Lock()
				seen = append(seen, r.Header.Clone())
				mu.Unlock()
				next.ServeHTTP(w, r)
			})
		},
	})
	id := wire.NewStreamID()
	body, _ := json.Marshal(map[string]any{"model": "mock-1", "messages": userMessages("[[mock: cut_after=5]] ids, please")})
	data, _ := json.Marshal(wire.Request{StreamID: id, Model: "mock-1", Body: body, Created: time.Now().Unix(), RequestID: "client-req-42"})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := h.js.Publish(ctx, wire.RequestSubject, data, jetstream.WithMsgID(id)); err != nil {
		t.Fatal(err)
	}
	if end := endOf(h.waitEnd(id)); end.Status != wire.StatusDone {
		t.Fatalf("end %+v", end)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 2 {
		t.Fatalf("%d calls, want the first and its continuation", len(seen))
	}
	for i, hd := range seen {
		if hd.Get("X-Relay-Stream-Id") != id || hd.Get("X-Request-Id") != "client-req-42" || hd.Get("Authorization") != "Bearer key-1" {
			t.Errorf("call %d headers %v", i+1, hd)
		}
	}
}
