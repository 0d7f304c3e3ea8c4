package worker

import (
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// keepInProgress tells the server every interval that msg is still being
// worked on, so it is not handed to another worker while this one streams.
// The returned stop ends the reports and waits for a report under way to
// finish; it may be called more than once.
//
// The reports run on a timer, not on a goroutine of their own: a job
// spends its life between reports, and a parked goroutine would cost each
// in-flight generation a stack for nothing.
func keepInProgress(msg jetstream.Msg, every time.Duration, logger *slog.Logger) (stop func()) {
	r := &progressReporter{msg: msg, every: every, logger: logger}
	r.mu.Lock()
	r.timer = time.AfterFunc(every, r.report)
	r.mu.Unlock()
	return r.stop
}

// progressReporter is the state of keepInProgress. mu is held while a
// report is sent, so stop, which takes it, waits for the report.
type progressReporter struct {
	msg    jetstream.Msg
	every  time.Duration
	logger *slog.Logger

	mu      sync.Mutex
	timer   *time.Timer
	stopped bool
}

// report sends one progress report and arms the next.
func (r *progressReporter) report() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return
	}
	if err := r.msg.InProgress(); err != nil {
		// The next report tries again; three misses in a row let the
		// request go to another worker, which fences us.
		r.logger.Warn("progress report failed", "err", err)
	}
	r.timer.Reset(r.every)
}

func (r *progressReporter) stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stopped = true
	r.timer.Stop()
}
