package coordinator

import (
	"testing"

	"github.com/relaydev/relay/relay/fleet/quota"
)

// The totals add each node's streams and their failures as they add its
// calls; a node whose counts went back (it restarted) counts from zero
// again, and one that left keeps what it added.
func TestCallTotalsAddStreams(t *testing.T) {
	tot := newCallTotals()
	report := func(node string, c quota.Calls) {
		tot.add(quota.Report{Node: node, Calls: map[string]quota.Calls{"new/m": c}})
	}
	report("a", quota.Calls{Calls: 10, Streams: 8, StreamFailures: 1})
	report("b", quota.Calls{Calls: 4, Streams: 4})
	report("a", quota.Calls{Calls: 12, Streams: 10, StreamFailures: 2})
	// b restarted: only its streams went back.
	report("b", quota.Calls{Calls: 5, Streams: 1, StreamFailures: 1})
	got := tot.get("new/m")
	if got.Calls != 12+4+5 || got.Streams != 10+4+1 || got.StreamFailures != 2+1 {
		t.Fatalf("totals %+v, want 21 calls, 15 streams, 3 stream failures", got)
	}
}
