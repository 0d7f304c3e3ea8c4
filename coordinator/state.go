package coordinator

import (
	"context"
	"crypto/rand"
	"encoding/hex"

	"github.com/relaydev/relay/relay/fleet"
	"github.com/relaydev/relay/relay/fleet/quota"
	"github.com/relaydev/relay/relay/wire"
)

// state is the active coordinator's view of the shared buckets.
type state struct {
	*fleet.View
	// calls accumulates the fleet's call counts per "<provider>/<model>"
	// from the differences between each node's reports.
	calls *callTotals
}

func (c *Coordinator) openState(ctx context.Context) (*state, error) {
	view, err := fleet.OpenView(ctx, c.deps.JS, c.deps.Logger,
		wire.HealthBucket, wire.QuotaBucket, wire.BreakerBucket, wire.CanaryBucket)
	if err != nil {
		return nil, err
	}
	s := &state{View: view, calls: newCallTotals()}
	view.FollowDemand(func(_ string, row fleet.Row[quota.Report], ok bool) {
		if ok {
			s.calls.add(row.Value)
		}
	})
	return s, nil
}

func randomID() string {
	var b [4]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
