package backoff

import (
	"context"
	"time"
)

// Rerun runs run until ctx ends, and starts it again after a delay
// whenever it returns before: for a watch or a loop meant to last as long
// as ctx, which returns only when it failed or could not start. The
// delays grow with each failure in a row; run reports with ran that it
// got going before it failed (a watch that replayed its keys, say), and
// then they start over from the first. retrying, if not nil, is told
// why run returned and how long Rerun waits before the next start.
func (b Backoff) Rerun(ctx context.Context, run func(context.Context) (ran bool, err error), retrying func(err error, d time.Duration)) {
	for failures := 0; ; failures++ {
		ran, err := run(ctx)
		if ctx.Err() != nil {
			return
		}
		if ran {
			failures = 0
		}
		d := b.Delay(failures, 0)
		if retrying != nil {
			retrying(err, d)
		}
		if b.Sleep(ctx, d) != nil {
			return
		}
	}
}
