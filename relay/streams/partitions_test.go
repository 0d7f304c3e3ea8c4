package streams_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/relay/relaytest"
	"github.com/relaydev/relay/relay/streams"
	"github.com/relaydev/relay/relay/wire"
)

// chunkStreams is the config of every chunk stream there is, by partition,
// of generations and of Durable Streams.
func chunkStreams(t *testing.T, ctx context.Context, js jetstream.JetStream) map[int]jetstream.StreamConfig {
	t.Helper()
	got := map[int]jetstream.StreamConfig{}
	for k := range wire.AllPartitions {
		s, err := js.Stream(ctx, wire.ChunkStreamName(k))
		switch {
		case errors.Is(err, jetstream.ErrStreamNotFound):
		case err != nil:
			t.Fatalf("stream %s: %v", wire.ChunkStreamName(k), err)
		default:
			got[k] = s.CachedInfo().Config
		}
	}
	return got
}

// TestPartitionsAreOneOnASingleServer: with streams.partitions unset, one
// server gets the one chunk stream of generations there was before
// partitions, and one of Durable Streams.
func TestPartitionsAreOneOnASingleServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, js := relaytest.Connect(t, relaytest.NATS(t), streams.Topology{})
	d := wire.DurablePartition(0)
	if got := chunkStreams(t, ctx, js); len(got) != 2 || got[0].Subjects[0] != "relay.chunks.*" || got[d].Subjects[0] != "relay.chunks.8.*" || got[d].Name != "RELAY_CHUNKS_8" {
		t.Fatalf("chunk streams %v, want RELAY_CHUNKS on relay.chunks.* and RELAY_CHUNKS_8 on relay.chunks.8.*", got)
	}
	if n, err := streams.Partitions(ctx, js); n != 1 || err != nil {
		t.Fatalf("Partitions = %d, %v; want 1", n, err)
	}
}

// TestPartitionsSetAreMadeAndKept: a count that is set makes that many
// chunk streams of generations and as many of Durable Streams, each on
// its own subjects, with the same replicas and retention, republishing to
// the live subjects, and holding its share of its kind's byte limit. A
// role that leaves the count unset agrees with it; a lower count leaves
// the streams above it, with the frames they hold, and a partition the
// count names that is missing, of either kind, makes the assets not set
// up.
func TestPartitionsSetAreMadeAndKept(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv := relaytest.NATS(t)
	_, js := relaytest.Connect(t, srv, streams.Topology{Partitions: 3, Retention: time.Hour, Storage: streams.StorageLimits{Chunks: 300, Durable: 30}})
	got := chunkStreams(t, ctx, js)
	if len(got) != 6 {
		t.Fatalf("%d chunk streams, want 6: %v", len(got), got)
	}
	for k, cfg := range got {
		if cfg.Subjects[0] != wire.ChunkSubjects(k) || cfg.RePublish == nil || cfg.RePublish.Destination != "relay.live.{{wildcard(1)}}" {
			t.Errorf("partition %d: subjects %v, republish %+v", k, cfg.Subjects, cfg.RePublish)
		}
		if cfg.MaxAge != time.Hour || cfg.Replicas != 1 || cfg.Discard != jetstream.DiscardOld || !cfg.AllowDirect {
			t.Errorf("partition %d: retention %v, replicas %d, discard %v, direct %t", k, cfg.MaxAge, cfg.Replicas, cfg.Discard, cfg.AllowDirect)
		}
		want := int64(100 << 20)
		if wire.IsDurablePartition(k) {
			want = 10 << 20
		} else if k >= 3 {
			t.Errorf("a generations' partition %d above the count", k)
		}
		if wire.IsDurablePartition(k) && k >= wire.DurablePartition(3) {
			t.Errorf("a Durable Streams' partition %d above the count", k)
		}
		if cfg.MaxBytes != want {
			t.Errorf("partition %d holds %d bytes, want a third of its kind's limit, %d", k, cfg.MaxBytes, want)
		}
	}
	auto, err := streams.Topology{}.On(ctx, js)
	if err != nil || auto.Partitions != 3 {
		t.Fatalf("an unset count on these assets: %d, %v; want 3", auto.Partitions, err)
	}

	// A frame in the third partition stays there when the count goes down.
	id := wire.NewStreamIDIn(2)
	if _, err := js.Publish(ctx, wire.ChunkSubject(id), wire.Frame{Kind: wire.KindClaim, Worker: "w"}.Encode()); err != nil {
		t.Fatal(err)
	}
	if err := streams.Setup(ctx, js, streams.Topology{Partitions: 2}); err != nil {
		t.Fatal(err)
	}
	if n, err := streams.Partitions(ctx, js); n != 2 || err != nil {
		t.Fatalf("Partitions = %d, %v after lowering it; want 2", n, err)
	}
	s, err := js.Stream(ctx, wire.ChunkStreamOf(id))
	if err != nil {
		t.Fatalf("the partition above the count is gone: %v", err)
	}
	if _, err := s.GetLastMsgForSubject(ctx, wire.ChunkSubject(id)); err != nil {
		t.Fatalf("its stream's frame is gone: %v", err)
	}
	if err := streams.Check(ctx, js); err != nil {
		t.Fatal(err)
	}

	if err := streams.Setup(ctx, js, streams.Topology{Partitions: 3}); err != nil {
		t.Fatal(err)
	}
	for _, k := range []int{1, wire.DurablePartition(2)} {
		if err := streams.Check(ctx, js); err != nil {
			t.Fatal(err)
		}
		if err := js.DeleteStream(ctx, wire.ChunkStreamName(k)); err != nil {
			t.Fatal(err)
		}
		if err := streams.Check(ctx, js); !errors.Is(err, streams.ErrNotSetUp) {
			t.Fatalf("Check with partition %d missing: %v, want ErrNotSetUp", k, err)
		}
		if err := streams.Setup(ctx, js, streams.Topology{Partitions: 3}); err != nil {
			t.Fatal(err)
		}
	}
}
