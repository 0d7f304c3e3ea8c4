package worker

import (
	"context"
	"time"
)

// Drain stops the worker gracefully, as on SIGTERM: it stops taking
// requests at once (a request received meanwhile goes back to the queue),
// lets the running streams finish within DrainTimeout, and then hands the
// streams still running to other workers: each stops its upstream call,
// publishes what it already received, and gives its request back to the
// queue at once, without an end frame, so that the next worker continues
// the stream without waiting for AckWait. With a negative DrainTimeout
// every stream is handed over at once.
//
// Drain returns once Run has returned. If ctx ends first, the streams
// still running are handed over at once, and Drain returns ctx.Err() after
// that. It may be called more than once, and before Run: Run then returns
// at once.
func (w *Worker) Drain(ctx context.Context) error {
	w.drainOnce.Do(func() {
		w.mu.Lock()
		close(w.draining)
		running := w.running
		w.mu.Unlock()
		if !running {
			w.finish()
			return
		}
		w.logger.Info("worker draining", "in_flight", w.jobs.len(), "drain_timeout", w.drainTimeout)
		go w.handOverAt(w.drainTimeout)
	})
	select {
	case <-w.done:
		return nil
	case <-ctx.Done():
		w.handOver("drain cancelled")
		<-w.done
		return ctx.Err()
	}
}

// handOverAt hands the running streams over after d, unless the worker
// stopped before.
func (w *Worker) handOverAt(d time.Duration) {
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-w.done:
			return
		case <-t.C:
		}
	}
	w.handOver("drain timeout")
}

func (w *Worker) handOver(why string) {
	if n := w.jobs.handOverAll(); n > 0 {
		w.logger.Info("handing streams over", "streams", n, "why", why)
	}
}
