package streams

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/relay/wire"
)

// quotaRetention bounds how long a report or a share outlives its writer:
// every live node rewrites its own each quota interval.
const quotaRetention = time.Minute

// leaseMarkerTTL is how long LeaseBucket keeps the marker of an expired
// lease, which tells watchers it expired.
const leaseMarkerTTL = time.Minute

// handoverRetention outlives any heartbeat still in flight when a delivery
// is handed over, so a late copy cannot hand it over twice.
const handoverRetention = 10 * time.Minute

// setupState creates the shared-state buckets, leaving alone any that exists
// as a mirror of another region's.
func setupState(ctx context.Context, js jetstream.JetStream, t Topology, storage jetstream.StorageType) error {
	configs := []jetstream.KeyValueConfig{
		{Bucket: wire.BreakerBucket, History: 1},
		{Bucket: wire.PauseBucket, History: 1},
		{Bucket: wire.QuotaBucket, History: 1, TTL: quotaRetention},
		{Bucket: wire.CanaryBucket, History: 1},
		{Bucket: wire.LeaseBucket, History: 1, LimitMarkerTTL: leaseMarkerTTL},
	}
	for _, cfg := range configs {
		cfg.Storage, cfg.Replicas, cfg.MaxBytes = storage, t.Replicas, mibBytes(t.Storage.State)
		if err := ensureKV(ctx, js, cfg); err != nil {
			return fmt.Errorf("streams: bucket %s: %w", cfg.Bucket, err)
		}
	}
	return nil
}

// answerMarkerTTL is how long AnswerBucket keeps the marker of an entry
// whose TTL ran out; per-key TTLs need markers on.
const answerMarkerTTL = time.Minute

// setupAnswers creates AnswerBucket: its entries carry their model's TTL
// (jetstream.KeyTTL), within the bucket's age limit.
func setupAnswers(ctx context.Context, js jetstream.JetStream, t Topology, storage jetstream.StorageType) error {
	err := ensureKV(ctx, js, jetstream.KeyValueConfig{
		Bucket:         wire.AnswerBucket,
		History:        1,
		TTL:            wire.AnswerMaxTTL,
		LimitMarkerTTL: answerMarkerTTL,
		MaxBytes:       mibBytes(t.Storage.Answers),
		Storage:        storage,
		Replicas:       t.Replicas,
	})
	if err != nil {
		return fmt.Errorf("streams: bucket %s: %w", wire.AnswerBucket, err)
	}
	return nil
}

// OpenHandovers returns HandoverBucket, creating it if it is missing
// (Setup does too). Roles that hand deliveries over call it at start.
func OpenHandovers(ctx context.Context, js jetstream.JetStream, t Topology) (jetstream.KeyValue, error) {
	t, err := t.On(ctx, js)
	if err != nil {
		return nil, err
	}
	err = t.place(func(t Topology) error {
		return ensureKV(ctx, js, jetstream.KeyValueConfig{
			Bucket:   wire.HandoverBucket,
			History:  1,
			TTL:      handoverRetention,
			MaxBytes: mibBytes(t.Storage.State),
			Storage:  t.StorageType(),
			Replicas: t.Replicas,
		})
	})
	if err != nil {
		return nil, fmt.Errorf("streams: bucket %s: %w", wire.HandoverBucket, err)
	}
	kv, err := js.KeyValue(ctx, wire.HandoverBucket)
	if err != nil {
		return nil, fmt.Errorf("streams: bucket %s: %w", wire.HandoverBucket, err)
	}
	return kv, nil
}
