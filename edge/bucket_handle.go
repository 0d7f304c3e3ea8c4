package edge

import (
	"context"
	"fmt"
	"sync"

	"github.com/nats-io/nats.go/jetstream"
)

// bucketHandle is a KV bucket bound on first use, not in New, because any
// role may come up before the assets are set up. The lookup asks the
// bucket's leader: across an election, it waits as the writes do
// (submit_wait.go).
type bucketHandle struct {
	js   jetstream.JetStream
	name string
	mu   sync.Mutex
	kv   jetstream.KeyValue
}

func (b *bucketHandle) bucket(ctx context.Context) (jetstream.KeyValue, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.kv == nil {
		err := retryLeaderless(ctx, func(ctx context.Context) (err error) {
			b.kv, err = b.js.KeyValue(ctx, b.name)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("edge: bucket %s: %w", b.name, err)
		}
	}
	return b.kv, nil
}
