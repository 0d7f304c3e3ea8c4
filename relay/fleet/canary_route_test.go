package fleet

import (
	"context"
	"testing"

	"github.com/relaydev/relay/relay/fleet/canary"
	"github.com/relaydev/relay/relay/fleet/quota"
	"github.com/relaydev/relay/relay/provider"
	"github.com/relaydev/relay/relay/relaytest"
	"github.com/relaydev/relay/relay/streams"
	"github.com/relaydev/relay/relay/wire"
)

// The gate counts the streams routed to the canary first, and as failures
// of the canary those that ended failed or incomplete on it: not one a
// fallback rescued, nor one that failed on the fallback, nor a cancelled
// one, nor a stream the canary was not given.
func TestSharedGateCountsCanaryStreams(t *testing.T) {
	_, js := relaytest.Connect(t, relaytest.NATS(t), streams.Topology{})
	catalog, err := provider.NewCatalog([]provider.Config{
		{Name: "stable", BaseURL: "http://127.0.0.1:1/v1", Models: []string{"m"}},
		{Name: "new", BaseURL: "http://127.0.0.1:2/v1", Models: []string{"m"}},
	}, provider.Model{Name: "m", Canary: &canary.Config{Provider: "new"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g, err := NewSharedGate(ctx, SharedGateConfig{ID: "w"}, SharedGateDeps{JS: js, Catalog: catalog})
	if err != nil {
		t.Fatal(err)
	}
	var stable, canaryC provider.Candidate
	for _, c := range catalog.Route("m") {
		if c.Provider.Name == "new" {
			canaryC = c
		} else {
			stable = c
		}
	}
	for _, e := range []StreamEnd{
		{Model: "m", First: canaryC, Last: canaryC, Status: wire.StatusDone},
		{Model: "m", First: canaryC, Last: canaryC, Status: wire.StatusFailed},
		{Model: "m", First: canaryC, Last: canaryC, Status: wire.StatusIncomplete},
		{Model: "m", First: canaryC, Last: stable, Status: wire.StatusDone},       // rescued
		{Model: "m", First: canaryC, Last: stable, Status: wire.StatusIncomplete}, // failed on the fallback
		{Model: "m", First: canaryC, Last: canaryC, Status: wire.StatusCancelled},
		{Model: "m", First: stable, Last: stable, Status: wire.StatusFailed},
	} {
		g.StreamEnded(e)
	}
	if c := g.Stats().Calls["new/m"]; c.Streams != 5 || c.StreamFailures != 2 {
		t.Fatalf("canary counts %+v, want 5 streams and 2 failures", c)
	}
	if c, ok := g.Stats().Calls["stable/m"]; ok {
		t.Fatalf("stable counted %+v", c)
	}
	var r quota.Report
	g.addToReport(&r)
	if c := r.Calls["new/m"]; c.Streams != 5 || c.StreamFailures != 2 {
		t.Fatalf("reported %+v, want 5 streams and 2 failures", c)
	}
}
