package edge

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/relay/wire"
)

// lostAckKV stores the first Create but answers it as a try whose answer
// never came, as a write whose stream lost its leader just after storing.
type lostAckKV struct {
	jetstream.KeyValue
	stored bool
}

func (k *lostAckKV) Create(ctx context.Context, key string, value []byte, opts ...jetstream.KVCreateOpt) (uint64, error) {
	rev, err := k.KeyValue.Create(ctx, key, value, opts...)
	if err == nil && !k.stored {
		k.stored = true
		return 0, context.DeadlineExceeded
	}
	return rev, err
}

// TestIdempotencyRecordSurvivesALostAnswer: a try that stored the record
// but lost its answer is tried again; the key is then found holding this
// request's own record, which is taken as written, not as another
// request's.
func TestIdempotencyRecordSurvivesALostAnswer(t *testing.T) {
	e := newEnv(t)
	kv, err := e.js.KeyValue(t.Context(), wire.IdempotencyBucket)
	if err != nil {
		t.Fatal(err)
	}
	lost := &lostAckKV{KeyValue: kv}
	var m idempotencyStore
	rev, err := m.create(t.Context(), lost, "k1", "stream-1", []byte(`{"stream_id":"stream-1"}`))
	if err != nil || rev == 0 || !lost.stored {
		t.Fatalf("create after a lost answer: revision %d, %v", rev, err)
	}
	// Another request's record is not taken for this one's.
	if _, err := m.create(t.Context(), kv, "k1", "stream-2", []byte(`{"stream_id":"stream-2"}`)); err == nil {
		t.Fatal("a second request took the first one's record")
	}
}
