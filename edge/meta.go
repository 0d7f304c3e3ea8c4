package edge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/relay/wire"
)

// errNoMeta means the stream is unknown, or expired with its metadata.
var errNoMeta = errors.New("edge: no metadata for stream")

// metaStore reads and creates stream metadata in wire.MetaBucket. The
// bucket handle is bound on first use, not in New, because any role may
// come up before the assets are set up.
type metaStore struct {
	js jetstream.JetStream
	mu sync.Mutex
	kv jetstream.KeyValue
}

func (m *metaStore) bucket(ctx context.Context) (jetstream.KeyValue, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.kv == nil {
		kv, err := m.js.KeyValue(ctx, wire.MetaBucket)
		if err != nil {
			return nil, fmt.Errorf("edge: bucket %s: %w", wire.MetaBucket, err)
		}
		m.kv = kv
	}
	return m.kv, nil
}

// get returns the stream's metadata and its revision, or errNoMeta.
func (m *metaStore) get(ctx context.Context, id string) (wire.Meta, uint64, error) {
	kv, err := m.bucket(ctx)
	if err != nil {
		return wire.Meta{}, 0, err
	}
	entry, err := kv.Get(ctx, id)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return wire.Meta{}, 0, errNoMeta
	}
	if err != nil {
		return wire.Meta{}, 0, fmt.Errorf("edge: get meta %s: %w", id, err)
	}
	var meta wire.Meta
	if err := json.Unmarshal(entry.Value(), &meta); err != nil {
		return wire.Meta{}, 0, fmt.Errorf("edge: decode meta %s: %w", id, err)
	}
	return meta, entry.Revision(), nil
}

// updateAttempts bounds the writes update tries: each lost one means another
// writer changed the Meta in between, which only a handful of racing
// cancellations (or a worker) can do.
const updateAttempts = 5

// errContended is returned by update when every attempt lost the race.
var errContended = errors.New("edge: meta changed by other writers on every attempt")

// update applies next, a pure function of the stored Meta, with writes
// checked against the revision read, so no other writer's change is lost:
// on a mismatch it reads again and recomputes. meta and revision are what
// the caller read last. next reports false when the Meta needs no write.
func (m *metaStore) update(ctx context.Context, id string, meta wire.Meta, revision uint64, next func(wire.Meta) (wire.Meta, bool)) error {
	kv, err := m.bucket(ctx)
	if err != nil {
		return err
	}
	for range updateAttempts {
		changed, write := next(meta)
		if !write {
			return nil
		}
		value, err := json.Marshal(changed)
		if err != nil {
			return fmt.Errorf("edge: encode meta: %w", err)
		}
		_, err = kv.Update(ctx, id, value, revision)
		if !errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			if err != nil {
				return fmt.Errorf("edge: update meta %s: %w", id, err)
			}
			return nil
		}
		if meta, revision, err = m.get(ctx, id); err != nil {
			return err
		}
	}
	return fmt.Errorf("%w: %s", errContended, id)
}

// create stores the metadata of a new stream; it fails if the id exists.
func (m *metaStore) create(ctx context.Context, id string, meta wire.Meta) error {
	kv, err := m.bucket(ctx)
	if err != nil {
		return err
	}
	value, err := json.Marshal(meta)
	if err != nil {
		return fmt.Errorf("edge: encode meta: %w", err)
	}
	if _, err := kv.Create(ctx, id, value); err != nil {
		return fmt.Errorf("edge: create meta %s: %w", id, err)
	}
	return nil
}
