package edge

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/relay/chunklog"
	"github.com/relaydev/relay/relay/relaytest"
	"github.com/relaydev/relay/relay/streams"
	"github.com/relaydev/relay/relay/wire"
)

// clusterMetas is how many Metas TestMetaReplicatedNeverMissing creates;
// each is read through every server right after its create was acked.
const clusterMetas = 500

// In an R3 cluster a KV get or a claim's read (direct gets) may reach a
// replica that does not hold yet a Meta or a claim the leader acknowledged:
// a false errNoMeta is a false 404 stream_not_found on another edge.
func TestMetaReplicatedNeverMissing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	nodes := relaytest.Cluster(t, 3)
	relaytest.Connect(t, nodes[0], streams.Topology{Replicas: 3})
	stores := make([]*metaStore, len(nodes))
	for i, s := range nodes {
		nc, err := nats.Connect(s.ClientURL())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		stores[i] = newMetaStore(js, chunklog.NewReader(nc, ""))
	}
	// A new bucket's replicas answer direct gets through a server only
	// once their interest reached it over the routes, which a loaded
	// machine delays: until then a get is "no responders", not a miss.
	for _, m := range stores {
		relaytest.Eventually(t, 10*time.Second, 20*time.Millisecond, func() bool {
			_, _, err := m.get(ctx, wire.NewStreamID())
			return errors.Is(err, errNoMeta)
		})
	}
	misses := 0
	for i := range clusterMetas {
		id := wire.NewStreamID()
		want := wire.Meta{Tenant: "t", Model: testModel, Created: int64(i + 1)}
		// Half the streams have a record, half only a claim (a request an
		// offer's taker claimed).
		record := i%2 == 0
		if record {
			if err := stores[i%len(stores)].create(ctx, id, want); err != nil {
				t.Fatal(err)
			}
		} else {
			claim := wire.ClaimFrame("w", &wire.Request{StreamID: id, Tenant: want.Tenant, Model: want.Model, Created: want.Created})
			if _, err := stores[i%len(stores)].js.Publish(ctx, wire.ChunkSubject(id), claim.Encode(), jetstream.WithExpectLastSequencePerSubject(0)); err != nil {
				t.Fatal(err)
			}
		}
		for k, m := range stores {
			got, rev, err := m.get(ctx, id)
			if err != nil || got != want || record != (rev != 0) {
				misses++
				t.Errorf("meta %d (record %v) through server %d: %+v rev %d, %v", i, record, k+1, got, rev, err)
			}
		}
	}
	for k, m := range stores {
		t.Logf("server %d: %d of %d record gets and %d claim reads missed and were confirmed by the leader",
			k+1, m.confirms.Load(), clusterMetas, m.reader.LeaderReads())
	}
	if misses > 0 {
		t.Fatalf("%d false misses", misses)
	}

	// What is not there, or was deleted, is still errNoMeta.
	if _, _, err := stores[1].get(ctx, wire.NewStreamID()); !errors.Is(err, errNoMeta) {
		t.Fatalf("unknown id: %v", err)
	}
	id := wire.NewStreamID()
	if err := stores[0].create(ctx, id, wire.Meta{Model: testModel}); err != nil {
		t.Fatal(err)
	}
	kv, err := stores[0].bucket(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := kv.Delete(ctx, id); err != nil {
		t.Fatal(err)
	}
	// A replica may still hold the Meta a moment after the delete was
	// acknowledged (a get that finds one is not confirmed by the leader),
	// but not for long.
	for _, m := range stores {
		relaytest.Eventually(t, 5*time.Second, 10*time.Millisecond, func() bool {
			_, _, err := m.get(ctx, id)
			return errors.Is(err, errNoMeta)
		})
	}
	// And the leader's word on one: the delete marker means no Meta.
	if _, _, err := stores[2].confirm(ctx, id); !errors.Is(err, errNoMeta) {
		t.Fatalf("confirm of a deleted id: %v", err)
	}
}
