package edge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/relay/chunklog"
	"github.com/relaydev/relay/relay/wire"
)

// errNoMeta means the stream is unknown, or expired with its metadata.
var errNoMeta = errors.New("edge: no metadata for stream")

// metaStore finds a stream's metadata (wire.Meta): in its first claim
// frame, or in its record in wire.MetaBucket, which an edge writes for a
// request no worker took from its offer, and to record a cancellation.
type metaStore struct {
	bucketHandle
	// js confirms a miss with the bucket's leader.
	js jetstream.JetStream
	// reader reads a stream's first frame.
	reader *chunklog.Reader
	// confirms counts the gets that missed and asked the leaders.
	confirms atomic.Uint64
}

func newMetaStore(js jetstream.JetStream, reader *chunklog.Reader) *metaStore {
	return &metaStore{bucketHandle: newBucketHandle(js, wire.MetaBucket), js: js, reader: reader}
}

// get returns the stream's metadata and the revision of its record (0
// when it has none, its claim carries it), or errNoMeta.
//
// A request an offer's taker claimed has its claim stored before the edge
// queued it, and so before its id is shown to anyone; any other has a
// record stored before its id is shown. Either read can miss on a replica
// that is behind its leader, so only the leaders' misses are errNoMeta.
func (m *metaStore) get(ctx context.Context, id string) (wire.Meta, uint64, error) {
	first, found, err := m.reader.First(ctx, id)
	if err != nil {
		return wire.Meta{}, 0, fmt.Errorf("edge: meta %s: %w", id, err)
	}
	if meta, ok := wire.ClaimMeta(first.Frame); found && ok {
		return meta, 0, nil
	}
	meta, revision, err := m.record(ctx, id)
	if !errors.Is(err, errNoMeta) {
		return meta, revision, err
	}
	first, found, err = m.reader.FirstFromLeader(ctx, id)
	if err != nil {
		return wire.Meta{}, 0, fmt.Errorf("edge: meta %s: %w", id, err)
	}
	if meta, ok := wire.ClaimMeta(first.Frame); found && ok {
		return meta, 0, nil
	}
	return wire.Meta{}, 0, errNoMeta
}

// record returns the stream's record in wire.MetaBucket and its revision,
// or errNoMeta.
func (m *metaStore) record(ctx context.Context, id string) (wire.Meta, uint64, error) {
	kv, err := m.bucket(ctx)
	if err != nil {
		return wire.Meta{}, 0, err
	}
	entry, err := kv.Get(ctx, id)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return m.confirm(ctx, id)
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

// confirm reads the stream's metadata from the bucket's leader after a get
// missed it. Gets on the replicated bucket are direct gets, answered by any
// replica, and a replica may not hold yet a Meta the leader acknowledged to
// the edge that created it: 16 ms later, another edge answered 404 for a
// stream that was streaming. Only the leader's miss is errNoMeta. A get
// that finds the Meta (nearly every one) costs nothing more; a miss costs
// one more round trip.
func (m *metaStore) confirm(ctx context.Context, id string) (wire.Meta, uint64, error) {
	m.confirms.Add(1)
	msg, found, err := chunklog.LeaderGet(ctx, m.js.Conn(), apiPrefix(m.js.Options()), metaStream,
		chunklog.LeaderQuery{LastFor: metaSubjectPrefix + id})
	if err != nil {
		return wire.Meta{}, 0, fmt.Errorf("edge: get meta %s: %w", id, err)
	}
	if !found {
		return wire.Meta{}, 0, errNoMeta
	}
	switch op := msg.Header.Get("KV-Operation"); {
	case op == "DEL", op == "PURGE", msg.Header.Get(jetstream.MarkerReasonHeader) != "":
		return wire.Meta{}, 0, errNoMeta
	}
	var meta wire.Meta
	if err := json.Unmarshal(msg.Data, &meta); err != nil {
		return wire.Meta{}, 0, fmt.Errorf("edge: decode meta %s: %w", id, err)
	}
	return meta, msg.Seq, nil
}

// The stream and subjects behind wire.MetaBucket, as nats.go's KV lays
// them out.
const (
	metaStream        = "KV_" + wire.MetaBucket
	metaSubjectPrefix = "$KV." + wire.MetaBucket + "."
)

// apiPrefix is the JetStream API prefix o's requests use.
func apiPrefix(o jetstream.JetStreamOptions) string {
	switch {
	case o.Domain != "":
		return "$JS." + o.Domain + ".API."
	case o.APIPrefix != "":
		return strings.TrimSuffix(o.APIPrefix, ".") + "."
	}
	return ""
}

// updateAttempts bounds the writes update tries: each lost one means another
// writer changed the Meta in between, which only a handful of racing
// cancellations (or a worker) can do.
const updateAttempts = 5

// errContended is returned by update when every attempt lost the race.
var errContended = errors.New("edge: meta changed by other writers on every attempt")

// update applies next, a pure function of the stored Meta, with writes
// checked against the revision read, so no other writer's change is lost:
// on a mismatch it reads the record again and recomputes. meta and
// revision are what the caller read last; revision 0 (the Meta of a claim)
// creates the record. next reports false when the Meta needs no write.
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
		if meta, revision, err = m.record(ctx, id); err != nil {
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
