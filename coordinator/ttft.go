package coordinator

import (
	"context"
	"encoding/json"
	"time"

	"github.com/relaydev/relay/relay/fleet"
	"github.com/relaydev/relay/relay/fleet/quota"
)

// publishTTFT writes the fleet's first-token figures (fleet.TTFTKey): the
// workers' recent times from the fresh reports, added up per provider and
// model, from which each worker reads the quantile it hedges at.
func (c *Coordinator) publishTTFT(ctx context.Context, s *state, fresh []quota.Report, now time.Time) {
	figs := fleet.MergeTTFT(fresh, now)
	data, _ := json.Marshal(figs)
	if _, err := s.Quotas.Put(ctx, fleet.TTFTKey, data); err != nil && ctx.Err() == nil {
		c.deps.Logger.Debug("first-token figures not written", "err", err)
	}
}
