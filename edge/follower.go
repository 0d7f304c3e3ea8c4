package edge

import (
	"context"
	"errors"
	"time"

	"github.com/relaydev/relay/relay/chunklog"
	"github.com/relaydev/relay/relay/protocol"
)

// history reads a stream's stored frames after a JetStream sequence.
// *chunklog.Reader is the real one.
type history interface {
	Read(ctx context.Context, streamID string, after uint64, fn func(chunklog.Entry) error) (uint64, error)
}

// errEnded stops a history read at the end frame.
var errEnded = errors.New("edge: end frame reached")

// errBatchFull stops a history read once a batch holds limit frames.
var errBatchFull = errors.New("edge: batch full")

// minBatch is the smallest batch limit, so that a tiny ClientBuffer does
// not turn a catch-up into one log read per frame.
const minBatch = 64

// follower delivers one client's view of one stream: the history after its
// cursor, then live frames from the hub, each exactly once and in order.
// It is used by one goroutine; only its queues are shared with the hub.
type follower struct {
	hub *hub
	id  string
	// live is the bounded queue the dispatcher fills without blocking.
	live chan *liveFrame
	// wake asks for a re-read of the log: frames were dropped, or may have
	// been lost, or a read stopped at limit.
	wake chan struct{}
	// limit bounds the frames one call of next returns, so that a client
	// far behind catches up from the log in bounded batches: what the edge
	// holds for one client is at most limit frames and the live queue.
	limit int

	// last is the JetStream sequence of the last frame taken, claims
	// included: a live frame is taken only if it was stored right after it.
	last    uint64
	started bool
	end     bool
	idle    *time.Timer
}

func newFollower(h *hub, id string, after uint64, buffer int) *follower {
	idle := time.NewTimer(time.Hour)
	idle.Stop()
	return &follower{
		hub:   h,
		id:    id,
		live:  make(chan *liveFrame, buffer),
		wake:  make(chan struct{}, 1),
		limit: max(buffer, minBatch),
		last:  after,
		idle:  idle,
	}
}

// close stops the follower's live feed.
func (f *follower) close() { f.hub.leave(f) }

// ended reports whether the end frame was returned.
func (f *follower) ended() bool { return f.end }

// wakeUp asks the follower to re-read the log. It never blocks: one pending
// request covers any number.
func (f *follower) wakeUp() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// next blocks until frames after the last one it returned are available
// and returns them in order, chunks and the end frame but never claims,
// together with everything else already queued, so the caller writes them
// in one batch. It returns no frames and no error when idle passed with
// nothing new (the caller sends a keepalive). The caller stops once ended()
// reports the end frame was returned. On an error it still returns the
// frames taken before it: they count as delivered. It returns at most
// limit frames; the rest follow on the next call.
func (f *follower) next(ctx context.Context, idle time.Duration) (out []chunklog.Entry, err error) {
	defer func() { f.hub.stats.held(len(out) + len(f.live)) }()
	if !f.started {
		f.started = true
		out, err = f.read(ctx, out)
	}
	f.idle.Reset(idle)
	defer f.idle.Stop()
	for err == nil && len(out) == 0 {
		select {
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		case lf := <-f.live:
			out, err = f.take(ctx, lf, out)
		case <-f.wake:
			out, err = f.catchUp(ctx, catchUpWoken, out)
		case <-f.idle.C:
			out, err = f.catchUp(ctx, catchUpIdle, out)
			if len(out) == 0 {
				return nil, err
			}
		}
	}
	for err == nil && !f.end && len(out) < f.limit {
		select {
		case lf := <-f.live:
			out, err = f.take(ctx, lf, out)
		case <-f.wake:
			out, err = f.catchUp(ctx, catchUpWoken, out)
		default:
			return out, nil
		}
	}
	return out, err
}

// take applies one live frame: skip what was delivered already, repair a
// gap from the log, otherwise emit it.
func (f *follower) take(ctx context.Context, lf *liveFrame, out []chunklog.Entry) ([]chunklog.Entry, error) {
	switch {
	case f.end || lf.entry.JSSeq <= f.last:
		return out, nil
	case lf.prev != f.last:
		return f.catchUp(ctx, catchUpGap, out)
	}
	return f.emit(lf.entry, out), nil
}

func (f *follower) catchUp(ctx context.Context, why catchUpReason, out []chunklog.Entry) ([]chunklog.Entry, error) {
	f.hub.stats.catchUps[why].Add(1)
	return f.read(ctx, out)
}

// read appends the stored frames after the last one taken, up to the end
// frame.
func (f *follower) read(ctx context.Context, out []chunklog.Entry) ([]chunklog.Entry, error) {
	if f.end {
		return out, nil
	}
	rctx, cancel := context.WithTimeout(ctx, natsTimeout)
	defer cancel()
	_, err := f.hub.hist.Read(rctx, f.id, f.last, func(e chunklog.Entry) error {
		out = f.emit(e, out)
		switch {
		case f.end:
			return errEnded
		case len(out) >= f.limit:
			// The next call reads on from here.
			f.wakeUp()
			return errBatchFull
		}
		return nil
	})
	switch {
	case err == nil || errors.Is(err, errEnded) || errors.Is(err, errBatchFull):
		return out, nil
	case ctx.Err() != nil:
		return out, context.Cause(ctx)
	}
	return out, err
}

func (f *follower) emit(e chunklog.Entry, out []chunklog.Entry) []chunklog.Entry {
	f.last = e.JSSeq
	switch e.Frame.Kind {
	case protocol.KindClaim:
		return out
	case protocol.KindEnd:
		f.end = true
	}
	return append(out, e)
}
