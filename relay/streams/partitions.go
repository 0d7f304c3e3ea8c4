package streams

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/relay/wire"
)

// # Partitions
//
// A stream's frames are stored in one of streams.partitions chunk streams
// (wire's "Partitions"), so that a cluster's raft rounds for chunks are
// shared among as many leaders. Unset, the count follows the servers: one
// per replica, so 3 on a cluster, whose leaders JetStream may place on
// three servers, and 1 on a single server. A cluster of more servers than
// replicas sets it to its size.
//
// The count is recorded in the first chunk stream's metadata
// (metaPartitions) by whoever sets the assets up, and every other role
// reads it from there (Partitions): an edge makes new streams in the
// partitions that exist, and a role that may not change the assets agrees
// with the one that did. Left unset, the count of assets that exist
// already is kept, as their replicas are. Lowering the count leaves the
// partitions above it as they are: the streams they hold stay readable
// by their ids for their retention; only new streams go elsewhere.
//
// Durable Streams have partitions of their own (wire.DurablePartition),
// as many as the generations: the count covers both, and everything said
// here of one kind holds of the other. Their byte limit is their own
// (StorageLimits.Durable), so that neither kind of stream can make the
// other's frames unresumable.

// metaPartitions is the key of the first chunk stream's metadata that
// records how many partitions there are.
const metaPartitions = "relay_partitions"

// partitionsOn is t's partitions: as set, or as the assets record them, or
// one per replica.
func (t Topology) partitionsOn(ctx context.Context, js jetstream.JetStream) (Topology, error) {
	if t.Partitions > 0 {
		return t, nil
	}
	t.autoPartitions = true
	n, err := Partitions(ctx, js)
	switch {
	case err == nil && n > 0:
		t.Partitions = n
	case err != nil && !errors.Is(err, jetstream.ErrStreamNotFound):
		return t, err
	default:
		t.Partitions = min(t.Replicas, wire.MaxPartitions)
	}
	return t, nil
}

// Partitions is how many partitions the assets have, as the first chunk
// stream records it: 1 for a chunk stream made before there were
// partitions, and jetstream.ErrStreamNotFound before it is made.
func Partitions(ctx context.Context, js jetstream.JetStream) (int, error) {
	s, err := js.Stream(ctx, wire.ChunkStream)
	if err != nil {
		return 0, err
	}
	return recordedPartitions(s.CachedInfo().Config), nil
}

// recordedPartitions is the count cfg's metadata records, 1 if none.
func recordedPartitions(cfg jetstream.StreamConfig) int {
	n, err := strconv.Atoi(cfg.Metadata[metaPartitions])
	if err != nil || n < 1 || n > wire.MaxPartitions {
		return 1
	}
	return n
}

// chunkPartitions are the partitions of n: the generations' 0 to n-1,
// then as many of Durable Streams.
func chunkPartitions(n int) []int {
	ks := make([]int, 0, 2*n)
	for k := range n {
		ks = append(ks, k)
	}
	for k := range n {
		ks = append(ks, wire.DurablePartition(k))
	}
	return ks
}

// setupChunks creates or updates the chunk stream of every partition.
// Each kind's byte limit is shared among its partitions: each holds its
// part of it.
func setupChunks(ctx context.Context, js jetstream.JetStream, t Topology) error {
	share := func(mib int64) int64 {
		b := mibBytes(mib)
		if b > 0 {
			b /= int64(t.Partitions)
		}
		return b
	}
	chunks, durable := share(t.Storage.Chunks), share(t.Storage.Durable)
	// The first partition records the count; it is made last, so that a
	// role that reads the count finds every partition it names.
	ks := chunkPartitions(t.Partitions)
	for i := len(ks) - 1; i >= 0; i-- {
		k := ks[i]
		cfg := jetstream.StreamConfig{
			Name:        wire.ChunkStreamName(k),
			Subjects:    []string{wire.ChunkSubjects(k)},
			Storage:     t.StorageType(),
			Replicas:    t.Replicas,
			MaxAge:      t.Retention,
			MaxBytes:    chunks,
			Discard:     jetstream.DiscardOld,
			AllowDirect: true,
			// A worker's appends to a replicated stream go in atomic batches
			// (chunklog.Committer). One server takes none: there a batch is
			// staged in a synced file, and the stream's reads would wait for
			// every write to be isolated from them.
			AllowAtomicPublish: t.Replicas > 1,
			RePublish: &jetstream.RePublish{
				Source:      wire.ChunkSubjects(k),
				Destination: wire.LiveSubject("{{wildcard(1)}}"),
			},
		}
		if wire.IsDurablePartition(k) {
			cfg.MaxBytes = durable
		}
		if k == 0 {
			cfg.Metadata = map[string]string{metaPartitions: strconv.Itoa(t.Partitions)}
		}
		if _, err := ensureStream(ctx, js, cfg); err != nil {
			return fmt.Errorf("streams: stream %s: %w", cfg.Name, err)
		}
	}
	return nil
}

// checkChunks reports whether every partition the assets record exists.
func checkChunks(ctx context.Context, js jetstream.JetStream) error {
	n, err := Partitions(ctx, js)
	if err != nil {
		return fmt.Errorf("%w: stream %s: %v", ErrNotSetUp, wire.ChunkStream, err)
	}
	for _, k := range chunkPartitions(n)[1:] {
		if _, err := js.Stream(ctx, wire.ChunkStreamName(k)); err != nil {
			return fmt.Errorf("%w: stream %s: %v", ErrNotSetUp, wire.ChunkStreamName(k), err)
		}
	}
	return nil
}

// PartitionInfo is one chunk stream as `relay status` shows it.
type PartitionInfo struct {
	Stream string `json:"stream"`
	// Leader is the server leading it ("" on one server, or during an
	// election); Replicas its replicas, leader included.
	Leader   string `json:"leader,omitempty"`
	Replicas int    `json:"replicas"`
	Messages uint64 `json:"messages"`
	Bytes    uint64 `json:"bytes"`
	MaxBytes int64  `json:"max_bytes"`
}

// ReadPartitions describes every partition the assets record, the
// generations' first.
func ReadPartitions(ctx context.Context, js jetstream.JetStream) ([]PartitionInfo, error) {
	n, err := Partitions(ctx, js)
	if err != nil {
		return []PartitionInfo{}, err
	}
	parts := make([]PartitionInfo, 0, 2*n)
	for _, k := range chunkPartitions(n) {
		s, err := js.Stream(ctx, wire.ChunkStreamName(k))
		if err != nil {
			return parts, fmt.Errorf("stream %s: %w", wire.ChunkStreamName(k), err)
		}
		info := s.CachedInfo()
		p := PartitionInfo{Stream: info.Config.Name, Replicas: info.Config.Replicas, Messages: info.State.Msgs,
			Bytes: info.State.Bytes, MaxBytes: info.Config.MaxBytes}
		if info.Cluster != nil {
			p.Leader = info.Cluster.Leader
		}
		parts = append(parts, p)
	}
	return parts, nil
}
