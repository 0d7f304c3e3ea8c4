package mockupstream

import (
	"context"
	"time"
)

// wait blocks for d, or until ctx is done so that a stall ends as soon as
// the client goes away. If every > 0 it calls tick at that interval
// meanwhile, and stops at the first error tick returns.
func wait(ctx context.Context, d, every time.Duration, tick func() error) error {
	if d <= 0 {
		return ctx.Err()
	}
	done := time.NewTimer(d)
	defer done.Stop()
	var ticks <-chan time.Time
	if every > 0 {
		t := time.NewTicker(every)
		defer t.Stop()
		ticks = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-done.C:
			return nil
		case <-ticks:
			if err := tick(); err != nil {
				return err
			}
		}
	}
}
