package edge

import (
	"context"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/relay/streams"
)

// bucketHandle is a KV bucket bound on first use (streams.Bucket), whose
// lookup waits out an election as the writes do (start_submit_wait.go).
type bucketHandle struct {
	b *streams.Bucket
}

func newBucketHandle(js jetstream.JetStream, name string) bucketHandle {
	return bucketHandle{streams.NewBucket(js, name, 0)}
}

func (h bucketHandle) bucket(ctx context.Context) (jetstream.KeyValue, error) {
	var kv jetstream.KeyValue
	err := retryLeaderless(ctx, func(ctx context.Context) (err error) {
		kv, err = h.b.KV(ctx)
		return err
	})
	return kv, err
}
