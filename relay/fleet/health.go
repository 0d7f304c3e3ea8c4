package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/relay/wire"
)

// PublishHealth writes a provider's health to the health bucket, which
// must be open in v (the active coordinator's view).
func (v *View) PublishHealth(ctx context.Context, h wire.Health) error {
	data, err := json.Marshal(h)
	if err != nil {
		return err
	}
	_, err = v.Health.Put(ctx, wire.KeyToken(h.Provider), data)
	return err
}

// HealthBoard reads the provider health the active coordinator publishes.
// It binds the bucket on first use, so a role that starts before the
// buckets exist still comes up. The zero value is ready to use.
type HealthBoard struct {
	mu sync.Mutex
	kv jetstream.KeyValue
}

// Read returns the last health published for provider; ok is false if
// none was.
func (b *HealthBoard) Read(ctx context.Context, js jetstream.JetStream, provider string) (h wire.Health, ok bool, err error) {
	b.mu.Lock()
	if b.kv == nil {
		kv, err := js.KeyValue(ctx, wire.HealthBucket)
		if err != nil {
			b.mu.Unlock()
			return h, false, fmt.Errorf("fleet: bucket %s: %w", wire.HealthBucket, err)
		}
		b.kv = kv
	}
	kv := b.kv
	b.mu.Unlock()
	e, err := kv.Get(ctx, wire.KeyToken(provider))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return h, false, nil
	}
	if err != nil {
		return h, false, err
	}
	if err := json.Unmarshal(e.Value(), &h); err != nil {
		return h, false, err
	}
	return h, true, nil
}
