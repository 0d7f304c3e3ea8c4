package worker

import (
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// keepInProgress tells the server every interval that msg is still being
// worked on, so it is not handed to another worker while this one streams.
// The returned stop ends the reports and waits for the reporter to exit;
// it may be called more than once.
func keepInProgress(msg jetstream.Msg, every time.Duration, logger *slog.Logger) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if err := msg.InProgress(); err != nil {
					// The next tick tries again; three misses in a row let
					// the request go to another worker, which fences us.
					logger.Warn("progress report failed", "err", err)
				}
			}
		}
	})
	return sync.OnceFunc(func() {
		close(done)
		wg.Wait()
	})
}
