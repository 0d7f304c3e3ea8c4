package coordinator

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/relay/fleet"
	"github.com/relaydev/relay/relay/fleet/breaker"
	"github.com/relaydev/relay/relay/fleet/canary"
	"github.com/relaydev/relay/relay/fleet/quota"
	"github.com/relaydev/relay/relay/wire"
)

// state is the active coordinator's view of the shared buckets.
type state struct {
	health   jetstream.KeyValue
	quotas   jetstream.KeyValue
	breakers *fleet.Table[breaker.State]
	canaries *fleet.Table[canary.State]
	reports  *fleet.Table[quota.Report]
	// calls accumulates the fleet's call counts per "<provider>/<model>"
	// from the differences between each node's reports.
	calls *callTotals
}

func (c *Coordinator) openState(ctx context.Context) (*state, error) {
	open := func(name string) (jetstream.KeyValue, error) {
		kv, err := c.deps.JS.KeyValue(ctx, name)
		if err != nil {
			return nil, fmt.Errorf("coordinator: bucket %s: %w", name, err)
		}
		return kv, nil
	}
	s := &state{calls: newCallTotals()}
	var err error
	if s.health, err = open(wire.HealthBucket); err != nil {
		return nil, err
	}
	if s.quotas, err = open(wire.QuotaBucket); err != nil {
		return nil, err
	}
	kb, err := open(wire.BreakerBucket)
	if err != nil {
		return nil, err
	}
	kc, err := open(wire.CanaryBucket)
	if err != nil {
		return nil, err
	}
	log := c.deps.Logger
	s.breakers = fleet.NewTable[breaker.State](kb, log)
	s.canaries = fleet.NewTable[canary.State](kc, log)
	s.reports = fleet.NewTable[quota.Report](s.quotas, log, fleet.DemandPrefix+">")
	s.reports.OnChange = func(_ string, row fleet.Row[quota.Report], ok bool) {
		if ok {
			s.calls.add(row.Value)
		}
	}
	return s, nil
}

func randomID() string {
	var b [4]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
