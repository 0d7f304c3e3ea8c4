package coordinator

import (
	"context"
	"log/slog"
	"time"

	"github.com/relaydev/relay/relay/streams"
)

// leadersEvery is how often the active coordinator evens out the chunk
// streams' leaders (streams.SpreadLeaders): soon after the partitions are
// made, and after a server's restart left it leading none.
const leadersEvery = 10 * time.Second

// runLeaders moves one partition's leader each leadersEvery while they are
// uneven. It makes no move on assets it may not change (the shipped NATS
// users let the coordinator step the chunk streams' leaders down).
func (c *Coordinator) runLeaders(ctx context.Context) {
	tick := time.NewTicker(leadersEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		look, cancel := context.WithTimeout(ctx, leadersEvery)
		m, moved, err := streams.SpreadLeaders(look, c.deps.JS)
		cancel()
		switch {
		case err != nil && ctx.Err() == nil:
			c.deps.Logger.Debug("chunk streams' leaders not evened out", "err", err)
		case moved:
			c.event("leaders", m.Stream+": leader "+m.From+" asked to hand over to "+m.To+", which led fewer partitions", slog.LevelInfo)
		}
	}
}
