package edge

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/relay/chunklog"
	"github.com/relaydev/relay/relay/wire"
)

// cursorKeys is the cluster's cursor key (wire.CursorKey), read from
// wire.KeyBucket once and kept. The first edge that finds none creates it,
// with a create that fails if another edge won the race; so every edge of
// the cluster seals with the same key, and a client resumes on any of
// them with no secret configured.
type cursorKeys struct {
	bucketHandle
	js jetstream.JetStream

	mu  sync.Mutex
	key *wire.CursorKey
}

func newCursorKeys(js jetstream.JetStream) *cursorKeys {
	return &cursorKeys{bucketHandle: newBucketHandle(js, wire.KeyBucket), js: js}
}

// get returns the key, reading or creating it on the first call that
// succeeds; callers wait for one another rather than race to read it.
func (c *cursorKeys) get(ctx context.Context) (*wire.CursorKey, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.key != nil {
		return c.key, nil
	}
	secret, err := c.load(ctx)
	if err != nil {
		return nil, err
	}
	key, err := wire.NewCursorKey(secret)
	if err != nil {
		return nil, fmt.Errorf("edge: bucket %s: %w", wire.KeyBucket, err)
	}
	c.key = key
	return key, nil
}

// load reads the secret from the bucket's leader (a replica may not hold
// yet one an edge just created), or creates it.
func (c *cursorKeys) load(ctx context.Context) ([]byte, error) {
	kv, err := c.bucket(ctx)
	if err != nil {
		return nil, err
	}
	secret, found, err := c.read(ctx)
	if err != nil || found {
		return secret, err
	}
	secret = make([]byte, wire.CursorKeySize)
	rand.Read(secret)
	_, err = kv.Create(ctx, wire.CursorKeyName, secret)
	if err == nil {
		return secret, nil
	}
	if !errors.Is(err, jetstream.ErrKeyExists) {
		return nil, fmt.Errorf("edge: create cursor key: %w", err)
	}
	if secret, found, err = c.read(ctx); err == nil && !found {
		err = fmt.Errorf("edge: cursor key exists and is not found in bucket %s", wire.KeyBucket)
	}
	return secret, err
}

// read returns the secret stored, if any.
func (c *cursorKeys) read(ctx context.Context) ([]byte, bool, error) {
	msg, found, err := chunklog.LeaderGet(ctx, c.js.Conn(), apiPrefix(c.js.Options()), "KV_"+wire.KeyBucket,
		chunklog.LeaderQuery{LastFor: "$KV." + wire.KeyBucket + "." + wire.CursorKeyName})
	if err != nil {
		return nil, false, fmt.Errorf("edge: read cursor key: %w", err)
	}
	return msg.Data, found, nil
}

// cursorKey returns the cluster's cursor key, or the error a client gets
// while it cannot be read.
func (s *Server) cursorKey(ctx context.Context) (*wire.CursorKey, *wire.Error) {
	key, err := s.cursors.get(ctx)
	if err != nil {
		return nil, unavailable("reading the key cursors are sealed with", err)
	}
	return key, nil
}
