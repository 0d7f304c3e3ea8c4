package edge

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/relaydev/relay/relay/relaytest"
	"github.com/relaydev/relay/relay/wire"
)

func TestSubmitOverMaxPayloadIs413(t *testing.T) {
	e := newEnv(t)
	edge := e.startEdge(Config{})
	// Under edge.max_body_bytes (1 MiB), over the server's max_payload
	// (1 MiB) once wrapped in a wire.Request.
	body := chatBody(true, strings.Repeat("x", DefaultMaxBodyBytes-200))
	if int64(len(body)) >= DefaultMaxBodyBytes || int64(len(body)) <= e.nc.MaxPayload()-publishHeadroom {
		t.Fatalf("body of %d bytes does not fall between the limits", len(body))
	}
	res := do(t, http.MethodPost, edge.url+"/v1/chat/completions", body, nil)
	var got struct{ Error wire.Error }
	if err := jsonDecode(res, &got); err != nil || res.StatusCode != http.StatusRequestEntityTooLarge ||
		got.Error.Code != CodeBodyTooLarge || !strings.Contains(got.Error.Message, "max_payload") {
		t.Fatalf("%d %+v %v", res.StatusCode, got, err)
	}
	kv, err := e.js.KeyValue(context.Background(), wire.MetaBucket)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := kv.ListKeys(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for k := range keys.Keys() {
		t.Errorf("a Meta was stored for a request never queued: %s", k)
	}
}

// An edge offers each request to the workers before it queues it, and
// queues it naming the worker that took it (wire "Offers"), with no Meta
// record: the taker's claim carries the Meta. A request no worker took is
// queued naming none, and its Meta is stored as a record.
func TestSubmitNamesTheWorkerThatTookTheOffer(t *testing.T) {
	for _, tc := range []struct {
		name, answer string
	}{
		{"taken", "w-7"},
		{"declined", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			offered := make(chan []byte, 1)
			sub, err := e.nc.QueueSubscribe(wire.OfferSubject, wire.OfferQueue, func(m *nats.Msg) {
				offered <- m.Data
				if err := m.Respond([]byte(tc.answer)); err != nil {
					t.Error(err)
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			defer sub.Unsubscribe()
			w := e.startWorker(&worker{script: answer(2), gate: make(chan struct{})})
			edge := e.startEdge(Config{})
			done := make(chan error, 1)
			go func() {
				res, err := http.Post(edge.url+"/v1/chat/completions", "application/json", strings.NewReader(chatBody(false, "hi")))
				if err == nil {
					res.Body.Close()
					if res.StatusCode != http.StatusOK {
						err = fmt.Errorf("status %d", res.StatusCode)
					}
				}
				done <- err
			}()
			req := <-w.reqs
			stream, err := e.js.Stream(context.Background(), wire.RequestStream)
			if err != nil {
				t.Fatal(err)
			}
			stored, err := stream.GetLastMsgForSubject(context.Background(), wire.RequestSubject)
			if err != nil {
				t.Fatal(err)
			}
			if got := stored.Header.Get(wire.HeaderTakenBy); got != tc.answer {
				t.Fatalf("queued request names %q as its taker, want %q", got, tc.answer)
			}
			if data := <-offered; !bytes.Equal(data, stored.Data) {
				t.Fatalf("offered %s\nqueued  %s", data, stored.Data)
			}
			var queued wire.Request
			if err := json.Unmarshal(stored.Data, &queued); err != nil || queued.StreamID != req.StreamID {
				t.Fatalf("queued request %s (%v), want stream %s", stored.Data, err, req.StreamID)
			}
			kv, err := e.js.KeyValue(context.Background(), wire.MetaBucket)
			if err != nil {
				t.Fatal(err)
			}
			if tc.answer == "" {
				// The edge stores it beside queueing the request: the
				// worker may have it first.
				relaytest.Eventually(t, 5*time.Second, 5*time.Millisecond, func() bool {
					_, err := kv.Get(context.Background(), req.StreamID)
					return err == nil
				})
			}
			close(w.gate)
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if _, err := kv.Get(context.Background(), req.StreamID); tc.answer != "" && err == nil {
				t.Fatal("a Meta record was stored for a request a worker took: its claim holds the Meta")
			}
		})
	}
}
