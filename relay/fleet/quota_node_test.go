package fleet_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/relay/fleet"
	"github.com/relaydev/relay/relay/fleet/quota"
	"github.com/relaydev/relay/relay/relaytest"
	"github.com/relaydev/relay/relay/streams"
	"github.com/relaydev/relay/relay/wire"
)

// quotaInterval is the nodes' report interval in these tests.
const quotaInterval = 50 * time.Millisecond

// runQuotaNodes runs a worker QuotaNode per id on srv, each with a limit of
// 90 requests a minute on provider p, until the test ends; stop ends one.
func runQuotaNodes(t *testing.T, kv jetstream.KeyValue, ids ...string) (nodes []*fleet.QuotaNode, stop map[string]func()) {
	t.Helper()
	stop = map[string]func(){}
	var wg sync.WaitGroup
	for _, id := range ids {
		n := &fleet.QuotaNode{KV: kv, ID: id, Role: "worker", Interval: quotaInterval, Logger: relaytest.Logger(t)}
		n.Declare(quota.ProviderRPM("p"), 90, quota.Limit{RPM: 90}, false)
		ctx, cancel := context.WithCancel(context.Background())
		wg.Go(func() { _ = n.Run(ctx) })
		stop[id] = cancel
		nodes = append(nodes, n)
	}
	t.Cleanup(func() {
		for _, cancel := range stop {
			cancel()
		}
		wg.Wait()
	})
	return nodes, stop
}

func quotaBucket(t *testing.T, js jetstream.JetStream) jetstream.KeyValue {
	t.Helper()
	kv, err := js.KeyValue(context.Background(), wire.QuotaBucket)
	if err != nil {
		t.Fatal(err)
	}
	return kv
}

// evenShares reports whether every node takes perMinute of the limit by
// its own count, no coordinator having set a share.
func evenShares(nodes []*fleet.QuotaNode, perMinute float64) bool {
	for _, n := range nodes {
		share, set := n.Share(quota.ProviderRPM("p"))
		if set || share != perMinute {
			return false
		}
	}
	return true
}

// TestQuotaNodesSplitEvenlyWithoutShares: without a coordinator, nodes
// split a limit evenly over the nodes of their role that report, and
// counting them costs no JetStream API call per round: the nodes follow
// each other's reports through one watch each, where listing the keys
// made and deleted a consumer per node per round (in a replicated
// cluster, each a proposal to the meta group).
func TestQuotaNodesSplitEvenlyWithoutShares(t *testing.T) {
	_, js := relaytest.Connect(t, relaytest.NATS(t), streams.Topology{})
	kv := quotaBucket(t, js)
	nodes, _ := runQuotaNodes(t, kv, "w1", "w2", "w3")
	relaytest.Eventually(t, 10*time.Second, 10*time.Millisecond, func() bool { return evenShares(nodes, 30) })

	ctx := context.Background()
	before, err := js.AccountInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	first, err := kv.Get(ctx, fleet.DemandKey("worker", "w1"))
	if err != nil {
		t.Fatal(err)
	}
	const rounds = 10
	relaytest.Eventually(t, 10*time.Second, 10*time.Millisecond, func() bool {
		e, err := kv.Get(ctx, fleet.DemandKey("worker", "w1"))
		return err == nil && e.Revision() >= first.Revision()+3*rounds
	})
	after, err := js.AccountInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The AccountInfo calls themselves count; rounds is far above them.
	if calls := after.API.Total - before.API.Total; calls >= rounds {
		t.Errorf("%d JetStream API calls over %d rounds of 3 nodes: counting the nodes should need none", calls, rounds)
	}
	if !evenShares(nodes, 30) {
		t.Error("the shares moved while every node kept reporting")
	}
}

// TestQuotaNodesSplitOverTheNodesStillReporting: a node that stops
// reporting stops counting once its report is stale (three intervals, at
// least 3 s), and the others take its part, rather than holding it back
// until its key expires from the bucket a minute later.
func TestQuotaNodesSplitOverTheNodesStillReporting(t *testing.T) {
	_, js := relaytest.Connect(t, relaytest.NATS(t), streams.Topology{})
	nodes, stop := runQuotaNodes(t, quotaBucket(t, js), "w1", "w2", "w3")
	relaytest.Eventually(t, 10*time.Second, 10*time.Millisecond, func() bool { return evenShares(nodes, 30) })
	stop["w3"]()
	relaytest.Eventually(t, 10*time.Second, 20*time.Millisecond, func() bool { return evenShares(nodes[:2], 45) })
}
