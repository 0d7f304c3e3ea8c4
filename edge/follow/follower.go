package follow

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/relaydev/relay/relay/backoff"
	"github.com/relaydev/relay/relay/chunklog"
	"github.com/relaydev/relay/relay/wire"
)

// History reads a stream's stored frames after a JetStream sequence.
// *chunklog.Reader is the real one.
type History interface {
	ReadUpTo(ctx context.Context, streamID string, after uint64, limit int, fn func(chunklog.Entry) error) (uint64, error)
	// ReadOn is ReadUpTo for a read that goes on in a long catch-up: it
	// reads in batches from the first frame.
	ReadOn(ctx context.Context, streamID string, after uint64, limit int, fn func(chunklog.Entry) error) (uint64, error)
	// Last is the JetStream sequence of the stream's last frame, 0 for
	// none, looked up without reading the log.
	Last(ctx context.Context, streamID string) (uint64, error)
}

// readTimeout bounds one read of the log, or one look-up of its last
// frame: a NATS round trip, or a few.
const readTimeout = 5 * time.Second

// errEnded stops a history read at the end frame.
var errEnded = errors.New("follow: end frame reached")

// MinBatch is the smallest batch limit, so that a tiny buffer does not
// turn a catch-up into one log read per frame: a follower returns up to
// max(buffer, MinBatch) frames at once.
const MinBatch = 64

// firstBatch bounds the first read of a follower that resumes a stream:
// the client's first event waits for that read only, one plain direct get
// (a batched get would first have the server count what is pending, a
// scan of the cursor's whole message block; chunklog.Reader.ReadUpTo);
// the rest follows in batches of limit.
const firstBatch = 1

// A read that stopped at a limit of longRead frames or more is part of a
// long catch-up: the next read goes on with batched gets only
// (History.ReadOn), since the stream likely holds many more frames and
// plain gets first would cost a round trip each on every read of the
// catch-up. A catch-up's reads ask for limit frames, at least MinBatch;
// only the first read of a resume (firstBatch) and reads that fill up a
// batch of live frames ask for fewer. After those, the next read starts
// with plain gets: a client back from a blip misses a few frames, which
// plain gets read without a batch's scan of the message block.
const longRead = MinBatch

// A failed read of the log (NATS slow or away) is retried with a backoff
// whose ceiling doubles from readRetryMin to readRetryMax while the
// client's stream stays open, with keepalives and the live frames that
// still arrive in order; the stream ends with an error only once reads
// failed for readGiveUp.
const (
	readRetryMin = 50 * time.Millisecond
	readRetryMax = 2 * time.Second
	readGiveUp   = 2 * time.Minute
)

// readRetry spaces the retries of a failed read. Its jitter keeps the
// followers that failed together (NATS away for all of them) from
// retrying together.
var readRetry = backoff.Backoff{Config: backoff.Config{Base: readRetryMin, Cap: readRetryMax}}

// Follower delivers one client's view of one stream: the history after its
// cursor, then live frames from the hub, each exactly once and in order.
//
// One goroutine at a time drives it, in one of two ways: Next blocks until
// there is something to send; Poll never waits (it reads the log in the
// caller's goroutine, though) and notify, set with SetNotify, says when it
// may have something again, so that an idle client needs no goroutine.
// The hub, the timers and the first read only queue work and call notify.
type Follower struct {
	hub *Hub
	id  string
	// limit bounds the frames one call of Next returns, so that a client
	// far behind catches up from the log in bounded batches: what the edge
	// holds for one client is at most limit frames and the live queue.
	limit int
	// buffer bounds the live queue.
	buffer int

	// mu guards what the hub and the timers hand over.
	mu sync.Mutex
	// queue is the live queue the dispatcher fills without blocking, read
	// from head on. It grows with use up to buffer frames, and an emptied
	// queue that grew large is released, so an idle follower holds next
	// to nothing.
	queue []*liveFrame
	head  int
	// pending is what the follower was woken for and has not acted on.
	pending wakes
	notify  func()

	// idleFor is how long the follower may find nothing before Next or
	// Poll returns empty (the caller sends a keepalive); idleAt is when the
	// armed idle timer fires, zero while it is not armed.
	idleFor time.Duration
	idleAt  time.Time
	idle    *time.Timer
	// signal is what notify wakes a blocked Next with.
	signal chan struct{}

	// phase is where the follower is in the log.
	phase readPhase
	// last is the JetStream sequence of the last frame taken, claims
	// included: a live frame is taken only if it was stored right after it.
	last uint64

	// failing is when the reads that are failing began to fail; zero while
	// reads succeed; failures counts them, the exponent of the backoff.
	failing  time.Time
	failures int
	// known is the JetStream sequence of a live frame that showed a gap
	// (repair): the log holds the frames up to it. stale counts the
	// re-reads in a row that found a replica behind it (staleRead).
	known uint64
	stale int
	// retrying is set while the retry timer is armed (armRetry), in any
	// phase but unread: no other read is made, as the retry covers
	// whatever a gap or a wake asked for, but live frames that follow in
	// order are still taken. The retry is a timer rather than a wait, so
	// that a client whose reads fail needs no goroutine either.
	retrying  bool
	retry     *time.Timer
	readRetry backoff.Backoff

	// first is closed when the first read, started early by Prefetch, is
	// done; its frames and error are firstOut and firstErr. stopFirst
	// cancels it.
	first     chan struct{}
	firstOut  []chunklog.Entry
	firstErr  error
	stopFirst context.CancelFunc
}

// readPhase is where a follower is in the log. It leaves unread with the
// first read (Hub.FollowNew starts a follower of a stream with no frames
// yet at live), each read then leaves it live, behind or farBehind (read),
// and the end frame makes it atEnd for good (emit). While a prefetched
// first read runs, its goroutine owns the phase: the caller looks at first.
type readPhase uint8

const (
	// unread: no read of the history after the cursor began.
	unread readPhase = iota
	// live: the last read found no more frames; the next ones come live,
	// or from a catch-up.
	live
	// behind: the last read stopped at its limit, so the next call reads
	// on first.
	behind
	// farBehind is behind after a read of longRead frames or more: a long
	// catch-up, whose next read pages at once (History.ReadOn).
	farBehind
	// atEnd: the end frame was taken.
	atEnd
)

// wakes is a set of reasons the hub and the timers woke a follower for.
type wakes uint8

const (
	// wakeReread asks for a re-read of the log: frames were dropped, or
	// may have been lost (wakeUp).
	wakeReread wakes = 1 << iota
	// wakeRetry: the retry timer fired.
	wakeRetry
	// wakeIdle: the idle timer fired.
	wakeIdle
)

// shrinkQueue is the capacity above which an emptied live queue is
// released rather than kept for the next frames.
const shrinkQueue = 8

func newFollower(h *Hub, id string, after uint64, buffer int) *Follower {
	f := &Follower{
		hub:    h,
		id:     id,
		limit:  max(buffer, MinBatch),
		buffer: max(buffer, 1),
		last:   after,

		readRetry: readRetry,
	}
	f.idle = time.AfterFunc(time.Hour, func() { f.wake(wakeIdle) })
	f.idle.Stop()
	return f
}

// SetNotify sets what is called, without locks held, whenever the follower
// may have something new, for a caller that drives it with Poll; idle is
// how long Poll may find nothing before it returns an empty batch (the
// caller sends a keepalive).
func (f *Follower) SetNotify(fn func(), idle time.Duration) {
	f.idleFor = idle
	f.setNotify(fn)
}

func (f *Follower) setNotify(fn func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.notify = fn
}

// wake adds w to the pending reasons and notifies.
func (f *Follower) wake(w wakes) {
	f.mu.Lock()
	f.pending |= w
	f.mu.Unlock()
	f.poke()
}

// poke calls notify.
func (f *Follower) poke() {
	f.mu.Lock()
	fn := f.notify
	f.mu.Unlock()
	if fn != nil {
		fn()
	}
}

// push queues a live frame, unless the queue is full: then it reports
// false, and the follower is to re-read the log instead. It never blocks.
func (f *Follower) push(lf *liveFrame) bool {
	f.mu.Lock()
	if len(f.queue)-f.head >= f.buffer {
		f.mu.Unlock()
		return false
	}
	if len(f.queue) == cap(f.queue) && f.head > 0 {
		n := copy(f.queue, f.queue[f.head:])
		clear(f.queue[n:])
		f.queue, f.head = f.queue[:n], 0
	}
	f.queue = append(f.queue, lf)
	f.mu.Unlock()
	f.poke()
	return true
}

// queued is how many live frames wait.
func (f *Follower) queued() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.queue) - f.head
}

// Ready reports whether Poll would return a live frame at once: one is
// queued that follows the last frame taken, and no read of the log is due
// before it. The writer asks before it writes a batch, to add what came
// while it rendered.
func (f *Follower) Ready() bool {
	if f.first != nil || f.phase != live {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.pending&wakeReread == 0 && f.head < len(f.queue) && f.queue[f.head].prev == f.last
}

// Close stops the follower's live feed and its timers. It may be called
// more than once.
func (f *Follower) Close() {
	f.hub.leave(f)
	if f.first != nil {
		f.stopFirst()
		<-f.first
	}
	if f.retry != nil {
		f.retry.Stop()
	}
	f.idle.Stop()
}

// Prefetch starts the first read of the history now, in a goroutine of its
// own, so that it overlaps with what the caller does before the first call
// of Next or Poll (checking the stream and the cursor, sending headers): the
// client's first event then waits for one round trip to NATS, not three.
// The read stops when ctx ends or the follower is closed.
func (f *Follower) Prefetch(ctx context.Context) {
	if f.first != nil || f.phase != unread {
		return
	}
	ctx, f.stopFirst = context.WithCancel(ctx)
	f.first = make(chan struct{})
	go func() {
		f.firstOut, f.firstErr = f.read(ctx, min(firstBatch, f.limit), nil)
		close(f.first)
		f.poke()
	}()
}

// AwaitFirst waits until a prefetched first read is done, or ctx ends.
func (f *Follower) AwaitFirst(ctx context.Context) error {
	if f.first == nil {
		return nil
	}
	select {
	case <-f.first:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// Ended reports whether the end frame was returned; not before a
// prefetched read's frames were.
func (f *Follower) Ended() bool { return f.first == nil && f.phase == atEnd }

// wakeUp asks the follower to re-read the log. It never blocks: one pending
// request covers any number.
func (f *Follower) wakeUp() { f.wake(wakeReread) }

// Next blocks until frames after the last one it returned are available
// and returns them in order, chunks and the end frame but never claims,
// together with everything else already queued, so the caller writes them
// in one batch. It returns no frames and no error when idle passed with
// nothing new (the caller sends a keepalive). The caller stops once Ended
// reports the end frame was returned. On an error it still returns the
// frames taken before it: they count as delivered. It returns at most
// limit frames; the rest follow on the next call.
func (f *Follower) Next(ctx context.Context, idle time.Duration) ([]chunklog.Entry, error) {
	if f.signal == nil {
		f.signal = make(chan struct{}, 1)
		f.setNotify(func() {
			select {
			case f.signal <- struct{}{}:
			default:
			}
		})
	}
	f.idleFor = idle
	for {
		if out, ok, err := f.Poll(ctx); ok {
			return out, err
		}
		select {
		case <-ctx.Done():
			f.disarmIdle()
			return nil, context.Cause(ctx)
		case <-f.signal:
		}
	}
}

// Poll is Next without the wait: ok is false where Next would wait, and
// the follower calls notify once it may have something. The idle timer
// (SetNotify) runs from the first poll that found nothing after a batch.
func (f *Follower) Poll(ctx context.Context) (out []chunklog.Entry, ok bool, err error) {
	switch {
	case f.first != nil: // before the phase, which the prefetch's goroutine writes
		select {
		case <-f.first:
		default:
			return nil, false, nil
		}
		out, err = f.firstOut, f.firstErr
		// Releasing the read's context lets go of the request it was
		// derived from.
		f.stopFirst()
		f.first, f.firstOut, f.firstErr, f.stopFirst = nil, nil, nil, nil
	case f.phase == unread:
		out, err = f.read(ctx, min(firstBatch, f.limit), out)
	case (f.phase == behind || f.phase == farBehind) && !f.retrying:
		f.hub.stats.catchUps[catchUpWoken].Add(1)
		out, err = f.read(ctx, f.limit, out)
	}
	for err == nil && len(out) == 0 {
		lf, w := f.pop(true)
		switch {
		case lf != nil:
			out, err = f.take(ctx, lf, out)
			lf.release()
		case w == wakeReread:
			out, err = f.catchUp(ctx, catchUpWoken, out)
		case w == wakeRetry:
			f.retrying = false
			if out, err = f.read(ctx, f.limit, out); err == nil {
				f.staleRead()
			}
		case w == wakeIdle:
			f.idleAt = time.Time{}
			out, err = f.catchUp(ctx, catchUpIdle, out)
			if len(out) == 0 {
				return f.batch(nil, err)
			}
		default:
			f.armIdle()
			return nil, false, nil
		}
	}
	for err == nil && f.phase != atEnd && len(out) < f.limit {
		lf, w := f.pop(false)
		switch {
		case lf != nil:
			out, err = f.take(ctx, lf, out)
			lf.release()
		case w == wakeReread:
			out, err = f.catchUp(ctx, catchUpWoken, out)
		default:
			return f.batch(out, nil)
		}
	}
	return f.batch(out, err)
}

// batch is what Poll returns with a batch, or with nothing after idle:
// the idle timer starts over.
func (f *Follower) batch(out []chunklog.Entry, err error) ([]chunklog.Entry, bool, error) {
	f.disarmIdle()
	f.hub.stats.held(len(out) + f.queued())
	return out, true, err
}

// pop takes one piece of work: a live frame, else one pending reason: a
// re-read, else (with timers) a fired retry or idle timer. An idle timer
// that fired before it was last disarmed is ignored.
func (f *Follower) pop(timers bool) (lf *liveFrame, w wakes) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case f.head < len(f.queue):
		lf, f.queue[f.head] = f.queue[f.head], nil
		f.head++
		if f.head == len(f.queue) {
			f.queue, f.head = f.queue[:0], 0
			if cap(f.queue) > shrinkQueue {
				f.queue = nil
			}
		}
	case f.pending&wakeReread != 0:
		w = wakeReread
	case !timers:
	case f.pending&wakeRetry != 0 && f.retrying:
		w = wakeRetry
	case f.pending&wakeIdle != 0:
		f.pending &^= wakeIdle
		if !f.idleAt.IsZero() && !time.Now().Before(f.idleAt) {
			w = wakeIdle
		}
	}
	f.pending &^= w
	return lf, w
}

// armIdle starts the idle timer unless it runs.
func (f *Follower) armIdle() {
	if f.idleAt.IsZero() {
		f.idleAt = time.Now().Add(f.idleFor)
		f.idle.Reset(f.idleFor)
	}
}

func (f *Follower) disarmIdle() {
	if !f.idleAt.IsZero() {
		f.idleAt = time.Time{}
		f.idle.Stop()
	}
}

// take applies one live frame: skip what was delivered already, repair a
// gap from the log, otherwise emit it.
func (f *Follower) take(ctx context.Context, lf *liveFrame, out []chunklog.Entry) ([]chunklog.Entry, error) {
	switch {
	case f.phase == atEnd || lf.entry.JSSeq <= f.last:
		return out, nil
	case lf.prev != f.last:
		return f.repair(ctx, lf, out)
	}
	return f.emit(lf.entry, out), nil
}

// staleRetries bounds the re-reads of frames a replica did not hold yet
// (see repair), each after a backoff of up to readRetryMin doubled by the
// ones before it: past them, the idle catch-up and the next live frame are
// what is left, as for any lost frame.
const staleRetries = 5

// repair reads the log for the frames between the last one taken and the
// live frame lf. lf proves them stored, up to lf itself: a read that stops
// short met a replica that does not hold them yet (a direct get is answered
// by any replica of a replicated stream). If it stopped right before lf,
// lf itself is taken from the live feed; if before that, the read is made
// again shortly (staleRead), instead of at the next live frame or idle.
func (f *Follower) repair(ctx context.Context, lf *liveFrame, out []chunklog.Entry) ([]chunklog.Entry, error) {
	f.known = max(f.known, lf.entry.JSSeq)
	out, err := f.catchUp(ctx, catchUpGap, out)
	if err == nil && f.phase == live && !f.retrying && f.last == lf.prev {
		out = f.emit(lf.entry, out)
	}
	if err == nil {
		f.staleRead()
	}
	return out, err
}

// staleRead arms a re-read if the last read stopped short of a frame the
// live feed proved stored (known).
func (f *Follower) staleRead() {
	switch {
	case f.last >= f.known || f.phase != live || f.retrying:
		f.stale = 0
		return
	case f.stale >= staleRetries:
		f.stale, f.known = 0, 0
		return
	}
	f.hub.stats.staleReads.Add(1)
	f.armRetry(f.readRetry.Delay(f.stale, 0))
	f.stale++
}

// catchUp re-reads the log after the last frame taken, unless a retry of a
// failed read is pending, which will. Woken or idle, it first looks up the
// stream's last frame and reads only if that is not the last one taken:
// most followers woken by a resync, or idle because the stream is slow,
// missed nothing, and a read costs round trips (one a frame where the
// frames lie far apart: chunklog.Reader.ReadUpTo).
func (f *Follower) catchUp(ctx context.Context, why catchUpReason, out []chunklog.Entry) ([]chunklog.Entry, error) {
	if f.retrying || f.phase == atEnd {
		return out, nil
	}
	f.hub.stats.catchUps[why].Add(1)
	if why != catchUpGap {
		lctx, cancel := context.WithTimeout(ctx, readTimeout)
		last, err := f.hub.hist.Last(lctx, f.id)
		cancel()
		switch {
		case err != nil && ctx.Err() != nil:
			return out, context.Cause(ctx)
		case err != nil:
			return out, f.failed(err)
		case last <= f.last:
			return out, nil
		}
	}
	return f.read(ctx, f.limit-len(out), out)
}

// read appends up to want stored frames after the last one taken (claims
// not counted), up to the end frame. If it got all it wanted, the follower
// is behind, far behind when it wanted longRead frames or more. A failed
// read is retried later (see readGiveUp); only the caller's context
// ending, or reads failing for readGiveUp, is an error.
func (f *Follower) read(ctx context.Context, want int, out []chunklog.Entry) ([]chunklog.Entry, error) {
	if f.phase == atEnd {
		return out, nil
	}
	rctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	start := len(out)
	readLog := f.hub.hist.ReadUpTo
	if f.phase == farBehind {
		readLog = f.hub.hist.ReadOn
	}
	f.phase = live
	for {
		ask, n := want-(len(out)-start), 0
		f.hub.stats.reads.Add(1)
		_, err := readLog(rctx, f.id, f.last, ask, func(e chunklog.Entry) error {
			n++
			out = f.emit(e, out)
			if f.phase == atEnd {
				return errEnded
			}
			return nil
		})
		switch {
		case err != nil && !errors.Is(err, errEnded) && ctx.Err() != nil:
			return out, context.Cause(ctx)
		case err != nil && !errors.Is(err, errEnded):
			return out, f.failed(err)
		}
		f.failing, f.failures = time.Time{}, 0
		switch {
		case n < ask || f.phase == atEnd:
			return out, nil // the log has no more
		case len(out)-start >= want && want >= longRead:
			f.phase = farBehind
			return out, nil
		case len(out)-start >= want:
			f.phase = behind
			return out, nil
		}
		// It read claims: read on for the frames they took the place of,
		// few, with plain gets.
		readLog = f.hub.hist.ReadUpTo
	}
}

// failed arms a retry of a read that failed with err, or returns the
// terminal error once reads failed for readGiveUp.
func (f *Follower) failed(err error) error {
	now := time.Now()
	if f.failing.IsZero() {
		f.failing = now
	}
	if failed := now.Sub(f.failing); failed >= readGiveUp {
		return fmt.Errorf("follow: reading the log failed for %v: %w", failed.Round(time.Second), err)
	}
	f.hub.stats.readRetries.Add(1)
	f.armRetry(f.readRetry.Delay(f.failures, 0))
	f.failures++
	return nil
}

// armRetry has the retry timer make the next read after d; until it
// fires, no other read is made.
func (f *Follower) armRetry(d time.Duration) {
	if f.retry == nil {
		f.retry = time.AfterFunc(d, func() { f.wake(wakeRetry) })
	} else {
		f.retry.Reset(d)
	}
	f.retrying = true
}

func (f *Follower) emit(e chunklog.Entry, out []chunklog.Entry) []chunklog.Entry {
	f.last = e.JSSeq
	switch e.Frame.Kind {
	case wire.KindClaim:
		return out
	case wire.KindEnd:
		f.phase = atEnd
	}
	if out == nil {
		out = (*batches.Get().(*[]chunklog.Entry))[:0]
	}
	return append(out, e)
}

// batches holds the slices of frames Next and Poll return, between the
// batches of the edge's streams: a frame is about 500 bytes, and a stream
// that is sent its tokens one at a time would otherwise allocate a slice
// for each. A slice comes back only when its caller is done with it
// (Release); one that grew past maxPooledBatch, in a catch-up, is let go.
var batches = sync.Pool{New: func() any {
	b := make([]chunklog.Entry, 0, pooledBatch)
	return &b
}}

const (
	pooledBatch    = 4
	maxPooledBatch = 16
)

// Release hands back a batch returned by Next or Poll once the caller is
// done with it and holds nothing of it.
func Release(batch []chunklog.Entry) {
	if cap(batch) == 0 || cap(batch) > maxPooledBatch {
		return
	}
	clear(batch) // its strings are not kept alive
	batch = batch[:0]
	batches.Put(&batch)
}
