package streams_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/relay/relaytest"
	"github.com/relaydev/relay/relay/streams"
	"github.com/relaydev/relay/relay/wire"
)

// assetReplicas is the replicas of every stream Setup made, bucket streams
// included, by name.
func assetReplicas(t *testing.T, js jetstream.JetStream) map[string]int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got := map[string]int{}
	infos := js.ListStreams(ctx)
	for info := range infos.Info() {
		got[info.Config.Name] = info.Config.Replicas
	}
	if err := infos.Err(); err != nil {
		t.Fatalf("list streams: %v", err)
	}
	if len(got) < 3 {
		t.Fatalf("only %d streams set up: %v", len(got), got)
	}
	return got
}

func wantEvery(t *testing.T, got map[string]int, want int) {
	t.Helper()
	for name, n := range got {
		if n != want {
			t.Errorf("%s has %d replicas, want %d (all: %v)", name, n, want, got)
		}
	}
}

// TestReplicasAreOneOnASingleServer: with streams.replicas unset, a single
// server (relay dev's, or one nats-server) gets one replica of everything,
// the only count it can hold.
func TestReplicasAreOneOnASingleServer(t *testing.T) {
	_, js := relaytest.Connect(t, relaytest.NATS(t), streams.Topology{})
	wantEvery(t, assetReplicas(t, js), 1)
}

// TestReplicasAreOneOnALeafNode: a single server joined to another by a
// leaf node is given a cluster name, but its JetStream stands alone and
// refuses more than one replica; with streams.replicas unset, Setup sets
// it up on one.
func TestReplicasAreOneOnALeafNode(t *testing.T) {
	r := relaytest.TwoRegions(t)
	nc, js := relaytest.Connect(t, r.B, streams.Topology{})
	if nc.ConnectedClusterName() == "" {
		t.Fatal("the leaf node names no cluster: this test no longer tests the fallback")
	}
	wantEvery(t, assetReplicas(t, js), 1)
}

// TestReplicasAreThreeOnACluster: with streams.replicas unset, a role
// connected to any server of a three-node cluster sets every stream and
// bucket up on three replicas, so the relay survives the loss of a server
// without anyone having set replicas; a count that is set is kept.
func TestReplicasAreThreeOnACluster(t *testing.T) {
	nodes := relaytest.Cluster(t, 3)
	_, js := relaytest.Connect(t, nodes[1], streams.Topology{})
	got := assetReplicas(t, js)
	wantEvery(t, got, streams.ClusterReplicas)
	for _, name := range []string{wire.RequestStream, wire.ChunkStream, "KV_" + wire.MetaBucket, "KV_" + wire.BreakerBucket} {
		if _, ok := got[name]; !ok {
			t.Errorf("%s not set up: %v", name, got)
		}
	}

	// And one chunk stream per replica, unset too.
	if n, err := streams.Partitions(context.Background(), js); n != streams.ClusterReplicas || err != nil {
		t.Errorf("%d partitions (%v), want %d", n, err, streams.ClusterReplicas)
	}
	for k := range streams.ClusterReplicas {
		if got[wire.ChunkStreamName(k)] != streams.ClusterReplicas {
			t.Errorf("%s not set up on %d replicas: %v", wire.ChunkStreamName(k), streams.ClusterReplicas, got)
		}
	}

	// A second role, on another server, agrees: nothing to change.
	_, js2 := relaytest.Connect(t, nodes[2], streams.Topology{})
	wantEvery(t, assetReplicas(t, js2), streams.ClusterReplicas)

	// The durable worker consumer follows its stream.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := js.Consumer(ctx, wire.RequestStream, wire.WorkerConsumer)
	if err != nil {
		t.Fatal(err)
	}
	if r := c.CachedInfo().Config.Replicas; r != streams.ClusterReplicas && r != 0 {
		t.Errorf("worker consumer has %d replicas, want %d (or the stream's)", r, streams.ClusterReplicas)
	}
}

// TestReplicasSetAreKeptOnACluster: an explicit streams.replicas wins over
// the cluster's size, and a role that leaves it unset later agrees with
// the assets as they are rather than rescaling them.
func TestReplicasSetAreKeptOnACluster(t *testing.T) {
	nodes := relaytest.Cluster(t, 3)
	_, js := relaytest.Connect(t, nodes[0], streams.Topology{Replicas: 1})
	wantEvery(t, assetReplicas(t, js), 1)

	_, js2 := relaytest.Connect(t, nodes[1], streams.Topology{})
	wantEvery(t, assetReplicas(t, js2), 1)
}

// TestReplicasAutoOnTwoServersSaysWhatToSet: a two-server cluster cannot
// place three replicas; Setup fails with JetStream's error and names the
// setting that fixes it, rather than quietly choosing fewer.
func TestReplicasAutoOnTwoServersSaysWhatToSet(t *testing.T) {
	nodes := relaytest.Cluster(t, 2)
	nc, err := nats.Connect(nodes[0].ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	// A cluster that just formed may refuse a first try for other
	// reasons for a moment; the refusal for the replicas comes soon.
	relaytest.Eventually(t, 20*time.Second, 100*time.Millisecond, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		err = streams.Setup(ctx, js, streams.Topology{})
		return err != nil && strings.Contains(err.Error(), "streams.replicas")
	})
	t.Logf("Setup on two servers: %v", err)
	relaytest.Connect(t, nodes[1], streams.Topology{Replicas: 2})
}
