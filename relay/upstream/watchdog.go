package upstream

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// watchdog cancels an upstream request when the provider goes silent. It
// counts bytes, not events, so SSE comments that providers send as
// keep-alives count as life, and so does a slow but steady long event.
//
// Until the first body byte the bound is first; after it, stall. A zero
// bound is off. The timer is a time.AfterFunc, not a goroutine, so an idle
// stream costs nothing but a timer.
//
// A read only notes the time (activity is on every chunk's path): the
// stall timer is not reset per read but, when it runs out, re-armed for
// what the bound has left since the last byte.
type watchdog struct {
	first, stall time.Duration
	cancel       context.CancelCauseFunc
	born         time.Time // the origin of last

	last    atomic.Int64 // when the last byte arrived, as time since born
	started atomic.Bool  // a body byte arrived

	mu      sync.Mutex
	timer   *time.Timer // nil until a bound is armed
	stopped bool
}

// startWatchdog arms the first-byte bound.
func startWatchdog(first, stall time.Duration, cancel context.CancelCauseFunc) *watchdog {
	w := &watchdog{first: first, stall: stall, cancel: cancel, born: time.Now()}
	if first > 0 {
		w.timer = time.AfterFunc(first, w.fire)
	}
	return w
}

// activity records that bytes arrived.
func (w *watchdog) activity() {
	w.last.Store(int64(time.Since(w.born)))
	if !w.started.Load() {
		w.start()
	}
}

// start trades the first-byte bound for the stall bound, at the first byte.
func (w *watchdog) start() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped || w.started.Load() {
		return
	}
	w.started.Store(true)
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

// fire cancels the request with a cause that says which bound ran out, or
// re-arms the stall bound if bytes came since it was armed. (A first-byte
// run that raced with the first byte finds the stall bound armed and not
// yet elapsed.)
func (w *watchdog) fire() {
	w.mu.Lock()
	if w.stopped || (w.started.Load() && w.stall <= 0) {
		w.mu.Unlock()
		return
	}
	started := w.started.Load()
	if started {
		if idle := time.Since(w.born) - time.Duration(w.last.Load()); idle < w.stall {
			w.timer.Reset(w.stall - idle)
			w.mu.Unlock()
			return
		}
	}
	w.mu.Unlock()
	if started {
		w.cancel(fmt.Errorf("%w: no bytes for %v", ErrStalled, w.stall))
		return
	}
	w.cancel(fmt.Errorf("%w: none within %v", ErrSilent, w.first))
}

// activityReader feeds the watchdog from the response body.
type activityReader struct {
	r  io.Reader
	wd *watchdog
}

func (a *activityReader) Read(p []byte) (int, error) {
	n, err := a.r.Read(p)
	if n > 0 {
		a.wd.activity()
	}
	return n, err
}
