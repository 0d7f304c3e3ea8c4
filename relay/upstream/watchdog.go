package upstream

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"
)

// watchdog cancels an upstream request when the provider goes silent. It
// counts bytes, not events, so SSE comments that providers send as
// keep-alives count as life, and so does a slow but steady long event.
//
// Until the first body byte the bound is first; after it, stall. A zero
// bound is off. The timer is a time.AfterFunc, not a goroutine, so an idle
// stream costs nothing but a timer.
type watchdog struct {
	first, stall time.Duration
	cancel       context.CancelCauseFunc

	mu      sync.Mutex
	timer   *time.Timer // nil until a bound is armed
	started bool        // a body byte arrived
	last    time.Time   // when the last byte arrived
	stopped bool
}

// startWatchdog arms the first-byte bound.
func startWatchdog(first, stall time.Duration, cancel context.CancelCauseFunc) *watchdog {
	w := &watchdog{first: first, stall: stall, cancel: cancel}
	if first > 0 {
		w.timer = time.AfterFunc(first, w.fire)
	}
	return w
}

// activity records that bytes arrived and restarts the stall bound.
func (w *watchdog) activity() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return
	}
	w.started = true
	w.last = time.Now()
	switch {
	case w.stall <= 0:
		if w.timer != nil {
			w.timer.Stop()
		}
	case w.timer == nil:
		w.timer = time.AfterFunc(w.stall, w.fire)
	default:
		w.timer.Reset(w.stall)
	}
}

// stop disarms the watchdog for good; the stream has ended one way or
// another.
func (w *watchdog) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stopped = true
	if w.timer != nil {
		w.timer.Stop()
	}
}

// fire cancels the request with a cause that says which bound ran out.
// A run that raced with activity finds the bound not yet elapsed and leaves
// it to the run that Reset scheduled.
func (w *watchdog) fire() {
	w.mu.Lock()
	stopped, started, idle := w.stopped, w.started, time.Since(w.last)
	w.mu.Unlock()
	if stopped || (started && (w.stall <= 0 || idle < w.stall)) {
		return
	}
	if started {
		w.cancel(fmt.Errorf("%w: no bytes for %v", ErrStalled, w.stall))
		return
	}
	w.cancel(fmt.Errorf("%w: no first byte within %v", ErrStalled, w.first))
}

// activityReader feeds the watchdog from the response body.
type activityReader struct {
	r  io.Reader
	wd *watchdog
}

func (a activityReader) Read(p []byte) (int, error) {
	n, err := a.r.Read(p)
	if n > 0 {
		a.wd.activity()
	}
	return n, err
}
