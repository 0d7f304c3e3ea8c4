package streams

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/relay/wire"
)

// Topology sizes the JetStream assets. The zero value means the defaults.
type Topology struct {
	// Replicas of every stream and bucket (zero: auto, 3 on a cluster and
	// 1 on a single server; replicas.go).
	Replicas int `koanf:"replicas"`
	// Retention is how long a stream's frames, and its metadata, can be
	// resumed after they were written (zero: 24h).
	Retention time.Duration `koanf:"retention"`
	// MemoryStorage keeps streams in memory instead of files: faster, and
	// lost when the server stops. Off by default.
	MemoryStorage bool `koanf:"memory_storage"`
	// AckWait is how long a request stays with a worker that stopped
	// reporting progress before it is handed to another (zero: 4s). Workers
	// report progress at a quarter of it.
	AckWait time.Duration `koanf:"ack_wait"`
	// Storage caps each stream and bucket (storage.go).
	Storage StorageLimits `koanf:"storage_mib"`
	// Partitions is how many chunk streams share the streams' frames
	// (zero: auto, one per replica; partitions.go).
	Partitions int `koanf:"partitions"`

	// autoReplicas: On chose Replicas, which the configuration left
	// unset; autoPartitions, likewise Partitions.
	autoReplicas, autoPartitions bool
}

// Defaults.
const (
	DefaultRetention = 24 * time.Hour
	DefaultAckWait   = 4 * time.Second
)

// WithDefaults fills zero fields but Replicas, which depends on the
// servers (On).
func (t Topology) WithDefaults() Topology {
	if t.Retention == 0 {
		t.Retention = DefaultRetention
	}
	if t.AckWait == 0 {
		t.AckWait = DefaultAckWait
	}
	t.Storage = t.Storage.withDefaults()
	return t
}

// StorageType is where every stream and bucket keeps its messages.
func (t Topology) StorageType() jetstream.StorageType {
	if t.MemoryStorage {
		return jetstream.MemoryStorage
	}
	return jetstream.FileStorage
}

// Validate names the first invalid field under prefix (e.g. "streams").
func (t Topology) Validate(prefix string) error {
	switch {
	case t.Replicas < 0 || t.Replicas > 5:
		return fmt.Errorf("%s.replicas: %d is not between 1 and 5", prefix, t.Replicas)
	case t.Partitions < 0 || t.Partitions > wire.MaxPartitions:
		return fmt.Errorf("%s.partitions: %d is not between 1 and %d", prefix, t.Partitions, wire.MaxPartitions)
	case t.Retention < 0:
		return fmt.Errorf("%s.retention: must not be negative", prefix)
	case t.AckWait < 0:
		return fmt.Errorf("%s.ack_wait: must not be negative", prefix)
	case t.AckWait > 0 && t.AckWait < 100*time.Millisecond:
		return fmt.Errorf("%s.ack_wait: %v is below 100ms", prefix, t.AckWait)
	}
	return t.Storage.validate(prefix + ".storage_mib")
}

// Setup creates or updates the streams, the worker consumer and the
// buckets, where they are missing or differ (ensure.go, buckets.go). Every
// role calls it at start, so any role can come up first; it is idempotent.
func Setup(ctx context.Context, js jetstream.JetStream, t Topology) error {
	t, err := t.On(ctx, js)
	if err != nil {
		return err
	}
	return t.place(func(t Topology) error { return setup(ctx, js, t) })
}

func setup(ctx context.Context, js jetstream.JetStream, t Topology) error {
	storage := t.StorageType()
	req, err := ensureStream(ctx, js, jetstream.StreamConfig{
		Name:       wire.RequestStream,
		Subjects:   []string{wire.RequestSubject},
		Retention:  jetstream.WorkQueuePolicy,
		Storage:    storage,
		Replicas:   t.Replicas,
		MaxAge:     t.Retention,
		MaxBytes:   mibBytes(t.Storage.Requests),
		Discard:    jetstream.DiscardNew,
		Duplicates: 2 * time.Minute,
	})
	if err != nil {
		return fmt.Errorf("streams: stream %s: %w", wire.RequestStream, err)
	}
	_, err = ensureConsumer(ctx, req, jetstream.ConsumerConfig{
		Durable:   wire.WorkerConsumer,
		AckPolicy: jetstream.AckExplicitPolicy,
		AckWait:   t.AckWait,
		// Redeliver for as long as the request lives: a stream is given up
		// by its worker (with a terminal frame), never by the queue.
		MaxDeliver: -1,
		// Every worker slot holds one pull and at most one unacked
		// message; the defaults (512 pulls, 1,000 pending) would cap a
		// fleet silently.
		MaxWaiting:    1 << 14,
		MaxAckPending: -1,
		Replicas:      t.Replicas,
	})
	if err != nil {
		return fmt.Errorf("streams: consumer %s: %w", wire.WorkerConsumer, err)
	}
	if err := setupChunks(ctx, js, t); err != nil { // partitions.go
		return err
	}
	err = ensureKV(ctx, js, jetstream.KeyValueConfig{
		Bucket:   wire.MetaBucket,
		History:  1,
		TTL:      t.Retention,
		MaxBytes: mibBytes(t.Storage.Metadata),
		Storage:  storage,
		Replicas: t.Replicas,
	})
	if err != nil {
		return fmt.Errorf("streams: bucket %s: %w", wire.MetaBucket, err)
	}
	err = ensureKV(ctx, js, jetstream.KeyValueConfig{
		Bucket:   wire.HealthBucket,
		History:  1,
		MaxBytes: mibBytes(t.Storage.State),
		Storage:  storage,
		Replicas: t.Replicas,
	})
	if err != nil {
		return fmt.Errorf("streams: bucket %s: %w", wire.HealthBucket, err)
	}
	err = ensureKV(ctx, js, jetstream.KeyValueConfig{
		Bucket:   wire.KeyBucket,
		History:  1,
		MaxBytes: keysBytes,
		Storage:  storage,
		Replicas: t.Replicas,
	})
	if err != nil {
		return fmt.Errorf("streams: bucket %s: %w", wire.KeyBucket, err)
	}
	err = ensureKV(ctx, js, jetstream.KeyValueConfig{
		Bucket:   wire.IdempotencyBucket,
		History:  1,
		TTL:      t.Retention,
		MaxBytes: mibBytes(t.Storage.Idempotency),
		Storage:  storage,
		Replicas: t.Replicas,
	})
	if err != nil {
		return fmt.Errorf("streams: bucket %s: %w", wire.IdempotencyBucket, err)
	}
	if _, err := OpenHandovers(ctx, js, t); err != nil {
		return err
	}
	if err := setupAnswers(ctx, js, t, storage); err != nil {
		return err
	}
	if err := setupUsage(ctx, js, t, storage); err != nil { // usage.go
		return err
	}
	return setupState(ctx, js, t, storage)
}

// keysBytes bounds wire.KeyBucket, which holds one key of a few bytes.
const keysBytes = 1 << 20

// ErrNotSetUp is returned by Check when an asset is missing.
var ErrNotSetUp = errors.New("streams: JetStream assets missing")

// Check reports whether the streams and buckets exist, for readiness.
func Check(ctx context.Context, js jetstream.JetStream) error {
	if _, err := js.Stream(ctx, wire.RequestStream); err != nil {
		return fmt.Errorf("%w: stream %s: %v", ErrNotSetUp, wire.RequestStream, err)
	}
	if err := checkChunks(ctx, js); err != nil {
		return err
	}
	for _, name := range append([]string{wire.MetaBucket, wire.KeyBucket, wire.IdempotencyBucket}, wire.SharedStateBuckets...) {
		if _, err := js.KeyValue(ctx, name); err != nil {
			return fmt.Errorf("%w: bucket %s: %v", ErrNotSetUp, name, err)
		}
	}
	return nil
}
