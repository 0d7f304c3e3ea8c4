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
// Keep-alives do not make an answer, though: once the stream delivered
// content, a third bound, content, limits the time between two deltas with
// content, whatever bytes come between them.
//
// Until the first body byte the bound is first; after it, stall and
// content. A zero bound is off. The timer is a time.AfterFunc, not a
// goroutine, so an idle stream costs nothing but a timer.
//
// A read only notes the time (activity is on every chunk's path): the
// timer is not reset per read but, when it runs out, re-armed for what the
// bounds have left since the last byte and the last content.
type watchdog struct {
	first, stall, content time.Duration
	cancel                context.CancelCauseFunc
	born                  time.Time // the origin of last and lastContent

	last        atomic.Int64 // when the last byte arrived, as time since born
	lastContent atomic.Int64 // when the last content arrived, likewise
	started     atomic.Bool  // a body byte arrived
	flowing     atomic.Bool  // content arrived

	mu      sync.Mutex
	timer   *time.Timer // nil until a bound is armed
	stopped bool
}

// startWatchdog arms the first-byte bound.
func startWatchdog(first, stall, content time.Duration, cancel context.CancelCauseFunc) *watchdog {
	w := &watchdog{first: first, stall: stall, content: content, cancel: cancel, born: time.Now()}
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

// progress records that a delta with content arrived.
func (w *watchdog) progress() {
	w.lastContent.Store(int64(time.Since(w.born)))
	if !w.flowing.Load() {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.flowing.Store(true)
		w.rearm()
	}
}

// start trades the first-byte bound for the stall bound, at the first byte.
func (w *watchdog) start() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.started.Load() {
		return
	}
	w.started.Store(true)
	w.rearm()
}

// rearm sets the timer for the first bound that can run out next, or
// stops it when none can. w.mu must be held.
func (w *watchdog) rearm() {
	if w.stopped {
		return
	}
	wait, ok := w.left()
	switch {
	case !ok:
		if w.timer != nil {
			w.timer.Stop()
		}
	case w.timer == nil:
		w.timer = time.AfterFunc(wait, w.fire)
	default:
		w.timer.Reset(wait)
	}
}

// left is how long until the stall or the content bound runs out, and
// false when neither applies; a bound already run out has 0 left.
func (w *watchdog) left() (time.Duration, bool) {
	now := time.Since(w.born)
	wait, ok := time.Duration(0), false
	for _, b := range [...]struct {
		on    bool
		bound time.Duration
		since *atomic.Int64
	}{{w.started.Load(), w.stall, &w.last}, {w.flowing.Load(), w.content, &w.lastContent}} {
		if !b.on || b.bound <= 0 {
			continue
		}
		rest := max(b.bound-(now-time.Duration(b.since.Load())), 0)
		if !ok || rest < wait {
			wait, ok = rest, true
		}
	}
	return wait, ok
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
// re-arms the timer if bytes or content came since it was armed. (A
// first-byte run that raced with the first byte finds the other bounds
// armed and not yet elapsed.)
func (w *watchdog) fire() {
	w.mu.Lock()
	if w.stopped {
		w.mu.Unlock()
		return
	}
	if !w.started.Load() {
		w.mu.Unlock()
		w.cancel(fmt.Errorf("%w: none within %v", ErrSilent, w.first))
		return
	}
	if wait, ok := w.left(); !ok || wait > 0 {
		if ok {
			w.timer.Reset(wait)
		}
		w.mu.Unlock()
		return
	}
	now := time.Since(w.born)
	bytesIdle := w.stall > 0 && now-time.Duration(w.last.Load()) >= w.stall
	w.mu.Unlock()
	if bytesIdle {
		w.cancel(fmt.Errorf("%w: no bytes for %v", ErrStalled, w.stall))
		return
	}
	w.cancel(fmt.Errorf("%w: no content for %v, only keep-alives", ErrStalled, w.content))
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
