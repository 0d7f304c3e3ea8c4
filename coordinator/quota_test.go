package coordinator_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/relaydev/relay/coordinator"
	"github.com/relaydev/relay/relay/fleet"
	"github.com/relaydev/relay/relay/fleet/quota"
	"github.com/relaydev/relay/relay/relaytest"
	"github.com/relaydev/relay/relay/streams"
	"github.com/relaydev/relay/relay/wire"
)

// A tenant's limit is split over every edge that reports, also the ones
// that have not seen the tenant yet: the shares add up to the limit.
func TestTenantLimitSharedByEveryEdge(t *testing.T) {
	srv := relaytest.NATS(t)
	_, js := relaytest.Connect(t, srv, streams.Topology{})
	ctx := context.Background()
	kv, _ := js.KeyValue(ctx, wire.QuotaBucket) // Put fails loudly without it
	key := quota.TenantRPM(wire.KeyToken("acme"))
	report := func(node string, demand map[string]float64) {
		data, _ := json.Marshal(quota.Report{Node: node, Role: "edge", At: time.Now().UTC(), Interval: 100, Demand: demand})
		if _, err := kv.Put(ctx, fleet.DemandKey("edge", node), data); err != nil {
			t.Fatal(err)
		}
	}
	report("busy", map[string]float64{key: 600})
	report("idle", nil)
	startCoordinator(t, srv, coordinator.Config{QuotaInterval: 50 * time.Millisecond, TenantRPM: 60}, upstreamOK(t), "c")

	share := func(node string) (float64, bool) {
		e, err := kv.Get(ctx, fleet.ShareKey(node))
		if err != nil {
			return 0, false
		}
		var s quota.Shares
		if json.Unmarshal(e.Value(), &s) != nil {
			return 0, false
		}
		v, ok := s.PerMinute[key]
		return v, ok
	}
	relaytest.Eventually(t, 5*time.Second, 20*time.Millisecond, func() bool {
		_, busy := share("busy")
		_, idle := share("idle")
		return busy && idle
	})
	busy, _ := share("busy")
	idle, _ := share("idle")
	if busy+idle != 60 || idle <= 0 || busy <= idle {
		t.Fatalf("shares of acme's 60 rpm: busy edge %v, idle edge %v", busy, idle)
	}
}
