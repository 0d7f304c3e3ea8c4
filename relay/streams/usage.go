package streams

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/relay/wire"
)

// usageRetention keeps a usage record past the end of any month it
// counts in: the current month's sums are read from the records.
const usageRetention = 32 * 24 * time.Hour

// setupUsage creates the usage ledger (relay/spend). When it is full, a
// record is refused and its stream's usage goes uncounted, which the
// worker logs; budgets then under-count rather than refuse anyone.
func setupUsage(ctx context.Context, js jetstream.JetStream, t Topology, storage jetstream.StorageType) error {
	err := ensureKV(ctx, js, jetstream.KeyValueConfig{
		Bucket:   wire.UsageBucket,
		History:  1,
		TTL:      usageRetention,
		MaxBytes: mibBytes(t.Storage.Usage),
		Storage:  storage,
		Replicas: t.Replicas,
	})
	if err != nil {
		return fmt.Errorf("streams: bucket %s: %w", wire.UsageBucket, err)
	}
	return nil
}
