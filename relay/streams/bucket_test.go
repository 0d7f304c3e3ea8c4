package streams_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/relay/streams"
)

// lookupJS answers each KeyValue lookup with the next of its errors, then
// with a bucket, counting the lookups.
type lookupJS struct {
	jetstream.JetStream
	errs    []error
	lookups int
}

func (j *lookupJS) KeyValue(context.Context, string) (jetstream.KeyValue, error) {
	j.lookups++
	if j.lookups <= len(j.errs) {
		return nil, j.errs[j.lookups-1]
	}
	return fakeKV{}, nil
}

type fakeKV struct{ jetstream.KeyValue }

// TestBucketIsLookedUpOnFirstUse: a bucket is looked up once and then
// reused; a lookup that found no leader is tried again at the next use;
// one that found the bucket missing stands for the uses within quiet,
// and is tried again after.
func TestBucketIsLookedUpOnFirstUse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		js := &lookupJS{errs: []error{context.DeadlineExceeded, jetstream.ErrBucketNotFound}}
		b := streams.NewBucket(js, "relay_usage", 5*time.Second)
		ctx := t.Context()
		if _, err := b.KV(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("first lookup: %v, want its timeout", err)
		}
		if _, err := b.KV(ctx); !errors.Is(err, jetstream.ErrBucketNotFound) || js.lookups != 2 {
			t.Fatalf("second use: %v after %d lookups, want the bucket missing after 2", err, js.lookups)
		}
		time.Sleep(4 * time.Second)
		if _, err := b.KV(ctx); !errors.Is(err, jetstream.ErrBucketNotFound) || js.lookups != 2 {
			t.Fatalf("a use within quiet: %v after %d lookups, want the bucket still missing, not looked up", err, js.lookups)
		}
		time.Sleep(time.Second)
		for range 3 {
			if kv, err := b.KV(ctx); err != nil || kv == nil {
				t.Fatalf("after quiet: %v", err)
			}
		}
		if js.lookups != 3 {
			t.Fatalf("%d lookups, want 3: the bucket found is kept", js.lookups)
		}
	})
	// Without quiet, every use looks again.
	js := &lookupJS{errs: []error{jetstream.ErrBucketNotFound}}
	b := streams.NewBucket(js, "relay_answers", 0)
	b.KV(t.Context())
	if _, err := b.KV(t.Context()); err != nil || js.lookups != 2 {
		t.Fatalf("second use without quiet: %v after %d lookups, want the bucket after 2", err, js.lookups)
	}
}
