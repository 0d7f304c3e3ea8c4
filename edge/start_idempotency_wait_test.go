package edge

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/relay/wire"
)

// lostAckKV stores the first Create and the first Update but answers each
// as a try whose answer never came, as a write whose stream lost its
// leader just after storing.
type lostAckKV struct {
	jetstream.KeyValue
	created, updated bool
}

func (k *lostAckKV) Create(ctx context.Context, key string, value []byte, opts ...jetstream.KVCreateOpt) (uint64, error) {
	rev, err := k.KeyValue.Create(ctx, key, value, opts...)
	if err == nil && !k.created {
		k.created = true
		return 0, context.DeadlineExceeded
	}
	return rev, err
}

func (k *lostAckKV) Update(ctx context.Context, key string, value []byte, last uint64) (uint64, error) {
	rev, err := k.KeyValue.Update(ctx, key, value, last)
	if err == nil && !k.updated {
		k.updated = true
		return 0, context.DeadlineExceeded
	}
	return rev, err
}

// TestIdempotencyRecordSurvivesALostAnswer: a try that stored the record
// (a new one, or one replacing a stale record) but lost its answer is
// tried again; the key is then found holding this request's own record,
// which is taken as written, not as another request's.
func TestIdempotencyRecordSurvivesALostAnswer(t *testing.T) {
	e := newEnv(t)
	kv, err := e.js.KeyValue(t.Context(), wire.IdempotencyBucket)
	if err != nil {
		t.Fatal(err)
	}
	lost := &lostAckKV{KeyValue: kv}
	var m idempotencyStore
	rev, err := m.create(t.Context(), lost, "k1", []byte(`{"stream_id":"stream-1"}`))
	if err != nil || rev == 0 || !lost.created {
		t.Fatalf("create after a lost answer: revision %d, %v", rev, err)
	}
	// Another request's record is not taken for this one's.
	if _, err := m.create(t.Context(), kv, "k1", []byte(`{"stream_id":"stream-2"}`)); err == nil {
		t.Fatal("a second request took the first one's record")
	}
	// The record gone stale is replaced, and the answer lost.
	rev2, err := m.replace(t.Context(), lost, "k1", []byte(`{"stream_id":"stream-3"}`), rev)
	if err != nil || rev2 <= rev || !lost.updated {
		t.Fatalf("replace after a lost answer: revision %d (was %d), %v", rev2, rev, err)
	}
	// Another request replacing the same stale revision does not win.
	if _, err := m.replace(t.Context(), kv, "k1", []byte(`{"stream_id":"stream-4"}`), rev); err == nil {
		t.Fatal("a second request replaced the record the first one wrote")
	}
	entry, err := kv.Get(t.Context(), "k1")
	if err != nil || string(entry.Value()) != `{"stream_id":"stream-3"}` {
		t.Fatalf("record %q, %v; want stream-3's", entry.Value(), err)
	}
}
