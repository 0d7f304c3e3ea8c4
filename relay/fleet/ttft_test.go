package fleet

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/relaydev/relay/relay/fleet/breaker"
	"github.com/relaydev/relay/relay/fleet/quota"
	"github.com/relaydev/relay/relay/provider"
	"github.com/relaydev/relay/relay/relaytest"
	"github.com/relaydev/relay/relay/wire"
)

// A worker's first-token times reach its quota report; the coordinator's
// figures, merged from such reports, come back as the gate's quantiles.
func TestSharedGateSharesFirstTokenTimes(t *testing.T) {
	g, js := sharedGate(t, provider.Config{})
	if _, ok := g.TTFTQuantile("p", "m", 0.95); ok {
		t.Fatal("a quantile before any figures")
	}
	for i := range 40 {
		ticket, err := g.Admit(context.Background(), "p", "m")
		if err != nil {
			t.Fatal(err)
		}
		ttft := 100 * time.Millisecond
		if i == 0 {
			ttft = 5 * time.Second // one slow call is not the p95 of 40
		}
		ticket.Done(Report{Provider: "p", Model: "m", Verdict: breaker.Success, TTFT: ttft})
	}
	kv, err := js.KeyValue(context.Background(), wire.QuotaBucket)
	if err != nil {
		t.Fatal(err)
	}
	var r quota.Report
	relaytest.Eventually(t, 10*time.Second, 10*time.Millisecond, func() bool {
		e, err := kv.Get(context.Background(), DemandKey("worker", "w1"))
		return err == nil && json.Unmarshal(e.Value(), &r) == nil && r.TTFT["p/m"].Count() == 40
	})
	// What the coordinator publishes from the fresh reports.
	putState(t, js, wire.QuotaBucket, TTFTKey, MergeTTFT([]quota.Report{r, r}, time.Now()))
	var p95 time.Duration
	relaytest.Eventually(t, 10*time.Second, 10*time.Millisecond, func() bool {
		var ok bool
		p95, ok = g.TTFTQuantile("p", "m", 0.95)
		return ok
	})
	if p95 < 100*time.Millisecond || p95 > 110*time.Millisecond {
		t.Fatalf("p95 = %v, want the bucket of 100ms", p95)
	}
	if _, ok := g.TTFTQuantile("p", "other", 0.95); ok {
		t.Fatal("a quantile of a model without figures")
	}
}

func TestMergeTTFTAddsUpTheNodes(t *testing.T) {
	a := quota.Report{Node: "a", TTFT: map[string]quota.TTFTHistogram{"p/m": {10: 3}, "q/m": {5: 1}}}
	b := quota.Report{Node: "b", TTFT: map[string]quota.TTFTHistogram{"p/m": {10: 2, 12: 1}}}
	figs := MergeTTFT([]quota.Report{a, b}, time.Now())
	if got := figs.Targets["p/m"]; got.N != 6 || got.Histogram[10] != 5 || got.Histogram[12] != 1 {
		t.Fatalf("p/m = %+v", got)
	}
	if got := figs.Targets["q/m"]; got.N != 1 || got.P95 != 0 {
		t.Fatalf("q/m = %+v: want one time and no quantile", got)
	}
}
