package edge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/relay/protocol"
)

// errNoMeta means the stream is unknown, or expired with its metadata.
var errNoMeta = errors.New("edge: no metadata for stream")

// metaStore reads and creates stream metadata in protocol.MetaBucket. The
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
		kv, err := m.js.KeyValue(ctx, protocol.MetaBucket)
		if err != nil {
			return nil, fmt.Errorf("edge: bucket %s: %w", protocol.MetaBucket, err)
		}
		m.kv = kv
	}
	return m.kv, nil
}

// get returns the stream's metadata, or errNoMeta.
func (m *metaStore) get(ctx context.Context, id string) (protocol.Meta, error) {
	kv, err := m.bucket(ctx)
	if err != nil {
		return protocol.Meta{}, err
	}
	entry, err := kv.Get(ctx, id)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return protocol.Meta{}, errNoMeta
	}
	if err != nil {
		return protocol.Meta{}, fmt.Errorf("edge: get meta %s: %w", id, err)
	}
	var meta protocol.Meta
	if err := json.Unmarshal(entry.Value(), &meta); err != nil {
		return protocol.Meta{}, fmt.Errorf("edge: decode meta %s: %w", id, err)
	}
	return meta, nil
}

// create stores the metadata of a new stream; it fails if the id exists.
func (m *metaStore) create(ctx context.Context, id string, meta protocol.Meta) error {
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
