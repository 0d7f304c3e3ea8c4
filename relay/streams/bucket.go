package streams

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Bucket is a KV bucket looked up on first use, not when a role starts:
// a role may come up before the assets are set up, and some need a bucket
// only for some requests. The lookup asks the bucket's leader, so during
// an election it fails as a write does (Leaderless), and is not held
// against the next use; callers that wait an election out retry it with
// their write (RetryLeaderless).
type Bucket struct {
	js   jetstream.JetStream
	name string
	// quiet is how long a lookup that failed for good (the bucket missing,
	// a lookup refused) keeps the next uses from trying again.
	quiet time.Duration

	mu sync.Mutex
	kv jetstream.KeyValue
	// failed is the last lookup's failure for good, and until when it
	// stands for the lookups not made.
	failed      error
	failedUntil time.Time
}

// NewBucket returns the bucket name of js, looked up on first use. After
// a lookup failed for good, uses within quiet fail with its error at once
// (zero: every use looks the bucket up again): a role that serves without
// the bucket would otherwise ask for it on every request.
func NewBucket(js jetstream.JetStream, name string, quiet time.Duration) *Bucket {
	return &Bucket{js: js, name: name, quiet: quiet}
}

// KV returns the bucket, looking it up if no lookup found it yet.
func (b *Bucket) KV(ctx context.Context) (jetstream.KeyValue, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.kv != nil {
		return b.kv, nil
	}
	if b.failed != nil && time.Now().Before(b.failedUntil) {
		return nil, b.failed
	}
	kv, err := b.js.KeyValue(ctx, b.name)
	if err != nil {
		err = fmt.Errorf("bucket %s: %w", b.name, err)
		if !Leaderless(context.Background(), err) {
			b.failed, b.failedUntil = err, time.Now().Add(b.quiet)
		}
		return nil, err
	}
	b.kv = kv
	return kv, nil
}
