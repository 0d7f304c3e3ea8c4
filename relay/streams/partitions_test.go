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

// chunkStreams is the config of every chunk stream there is, by partition.
func chunkStreams(t *testing.T, ctx context.Context, js jetstream.JetStream) map[int]jetstream.StreamConfig {
	t.Helper()
	got := map[int]jetstream.StreamConfig{}
	for k := range wire.MaxPartitions {
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
// server gets the one chunk stream there was before partitions.
func TestPartitionsAreOneOnASingleServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, js := relaytest.Connect(t, relaytest.NATS(t), streams.Topology{})
	if got := chunkStreams(t, ctx, js); len(got) != 1 || got[0].Subjects[0] != "relay.chunks.*" {
		t.Fatalf("chunk streams %v, want RELAY_CHUNKS alone on relay.chunks.*", got)
	}
	if n, err := streams.Partitions(ctx, js); n != 1 || err != nil {
		t.Fatalf("Partitions = %d, %v; want 1", n, err)
	}
}

// TestPartitionsSetAreMadeAndKept: a count that is set makes that many
// chunk streams, each on its own subjects, republishing to the live
// subjects, and holding its share of the chunks' byte limit. A role that
// leaves the count unset agrees with it; a lower count leaves the streams
// above it, with the frames they hold, and a partition the count names
// that is missing makes the assets not set up.
func TestPartitionsSetAreMadeAndKept(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv := relaytest.NATS(t)
	_, js := relaytest.Connect(t, srv, streams.Topology{Partitions: 3, Storage: streams.StorageLimits{Chunks: 300}})
	got := chunkStreams(t, ctx, js)
	if len(got) != 3 {
		t.Fatalf("%d chunk streams, want 3: %v", len(got), got)
	}
	for k, cfg := range got {
		if cfg.Subjects[0] != wire.ChunkSubjects(k) || cfg.RePublish == nil || cfg.RePublish.Destination != "relay.live.{{wildcard(1)}}" {
			t.Errorf("partition %d: subjects %v, republish %+v", k, cfg.Subjects, cfg.RePublish)
		}
		if cfg.MaxBytes != 100<<20 {
			t.Errorf("partition %d holds %d bytes, want a third of 300 MiB", k, cfg.MaxBytes)
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
	if err := js.DeleteStream(ctx, wire.ChunkStreamName(1)); err != nil {
		t.Fatal(err)
	}
	if err := streams.Check(ctx, js); !errors.Is(err, streams.ErrNotSetUp) {
		t.Fatalf("Check with partition 1 missing: %v, want ErrNotSetUp", err)
	}
}
