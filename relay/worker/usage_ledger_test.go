package worker

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/relay/mockupstream"
	"github.com/relaydev/relay/relay/relaytest"
	"github.com/relaydev/relay/relay/spend"
	"github.com/relaydev/relay/relay/wire"
)

// submitFor queues a request of tenant's key for stream id, published
// under msgID (a duplicate of a request is another message).
func (h *harness) submitFor(id, msgID, tenant, key string, created time.Time) {
	h.t.Helper()
	body, _ := json.Marshal(map[string]any{"model": "mock-1", "messages": userMessages("count me")})
	data, _ := json.Marshal(wire.Request{StreamID: id, Tenant: tenant, Key: key, Model: "mock-1", Body: body, Created: created.Unix()})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := h.js.Publish(ctx, wire.RequestSubject, data, jetstream.WithMsgID(msgID)); err != nil {
		h.t.Fatalf("submit: %v", err)
	}
}

// ledger returns every record of the usage ledger, by key.
func (h *harness) ledger() map[string]spend.Record {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	kv, err := h.js.KeyValue(ctx, wire.UsageBucket)
	if err != nil {
		h.t.Fatal(err)
	}
	keys, err := kv.ListKeys(ctx)
	if err != nil {
		h.t.Fatal(err)
	}
	out := map[string]spend.Record{}
	for k := range keys.Keys() {
		e, err := kv.Get(ctx, k)
		if err != nil {
			h.t.Fatal(err)
		}
		var r spend.Record
		if err := json.Unmarshal(e.Value(), &r); err != nil {
			h.t.Fatal(err)
		}
		out[k] = r
	}
	return out
}

// jobLines counts the "job finished" lines of stream id.
func (h *harness) jobLines(id string) int {
	n := 0
	h.logs.find(func(l map[string]string) bool {
		if l["msg"] == "job finished" && l["stream"] == id {
			n++
		}
		return false
	})
	return n
}

// The job that ends a stream records its usage and cost, as its end frame
// says them, under its tenant, key and the day the request was accepted.
func TestUsageRecordedByTheJobThatEnds(t *testing.T) {
	h := start(t, setup{mock: mockupstream.Config{Tokens: 6, TokenInterval: -1}})
	id := wire.NewStreamID()
	created := time.Now()
	h.submitFor(id, id, "acme", "k1", created)
	if status := h.waitJob(id); status != string(wire.StatusDone) {
		t.Fatalf("job status = %q", status)
	}
	frames := h.frames(id)
	end := frames[len(frames)-1].Frame
	if end.Usage == nil || end.Usage.TotalTokens == 0 {
		t.Fatalf("end frame without usage: %+v", end)
	}
	got := h.ledger()
	want := spend.Record{Tenant: "acme", Key: "k1", Day: spend.DayOf(created), Tokens: int64(end.Usage.TotalTokens), CostUSD: end.Cost}
	if len(got) != 1 {
		t.Fatalf("ledger: %v, want one record", got)
	}
	for _, r := range got {
		if r != want {
			t.Errorf("record %+v, want %+v", r, want)
		}
	}
}

// A worker that stopped between its end frame and its record leaves the
// usage to the next job of the request, which finds the stream ended and
// records it from the end frame; every further delivery of the request
// finds it recorded and adds nothing.
func TestUsageRecordedOnceWhenTheEndIsSeenAgain(t *testing.T) {
	h := start(t, setup{mock: mockupstream.Config{TokenInterval: -1}, noWorker: true})
	id := wire.NewStreamID()
	usage := &wire.Usage{PromptTokens: 11, CompletionTokens: 5, TotalTokens: 16}
	if err := h.appendFrames(id,
		wire.Frame{Kind: wire.KindClaim, Worker: "gone"},
		wire.Frame{Kind: wire.KindChunk, Role: "assistant", Content: "hi", Provider: "mock", Model: "mock-1", Attempt: 1},
		wire.Frame{Kind: wire.KindEnd, Status: wire.StatusDone, FinishReason: "stop", Attempts: 1, Usage: usage, Cost: 0.5},
	); err != nil {
		t.Fatal(err)
	}
	created := time.Now()
	h.submitFor(id, id, "acme", "k1", created)
	h.redeliver()
	h.startWorker(Config{}, nil)
	if status := h.waitJob(id); status != "already_ended" {
		t.Fatalf("job status = %q, want already_ended", status)
	}
	h.submitFor(id, id+"-again", "acme", "k1", created)
	h.submitFor(id, id+"-once-more", "acme", "k1", created)
	relaytest.Eventually(t, waitFor, 5*time.Millisecond, func() bool { return h.jobLines(id) == 3 })
	got := h.ledger()
	want := spend.Record{Tenant: "acme", Key: "k1", Day: spend.DayOf(created), Tokens: 16, CostUSD: 0.5}
	if len(got) != 1 {
		t.Fatalf("ledger: %v, want one record", got)
	}
	for _, r := range got {
		if r != want {
			t.Errorf("record %+v, want %+v", r, want)
		}
	}
}
