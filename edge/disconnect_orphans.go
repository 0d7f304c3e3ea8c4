package edge

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/relaydev/relay/relay/chunklog"
	"github.com/relaydev/relay/relay/wire"
)

// orphans carries out the cancel_after disconnect policy: for each stream
// whose starting client went away, a timer asks every edge whether a client
// follows the stream (disconnect_presence.go) and cancels it when nobody does. A timer
// that finds a follower, or cannot tell, asks again after the same
// duration; one that cancelled, or found the stream ended or gone, stops.
//
// Timers are not durable: close drops the pending ones (their streams run
// on) and waits for the running ones.
type orphans struct {
	// followed asks for presence; cancel is Server.cancel.
	followed func(ctx context.Context, id string) (bool, error)
	cancel   func(ctx context.Context, tenant, id string) (chunklog.Entry, *wire.Error)
	log      *slog.Logger

	// ctx ends the running checks when the edge stops.
	ctx  context.Context
	stop context.CancelFunc

	mu      sync.Mutex
	closed  bool
	pending map[*time.Timer]struct{}
	// running counts timers scheduled and not stopped, until their
	// function has returned.
	running sync.WaitGroup

	stats orphanStats
}

// orphanStats counts what the policy did; metrics will export them.
type orphanStats struct {
	// left counts starting clients that went away before the end, whatever
	// the policy.
	left atomic.Uint64
	// watched counts the streams of those put under watch (cancel_after).
	watched atomic.Uint64
	// checks counts the checks, by outcome.
	checks [numOrphanOutcomes]atomic.Uint64
}

// orphanOutcome is what one check found.
type orphanOutcome int

const (
	// orphanFollowed: a client follows the stream; ask again later.
	orphanFollowed orphanOutcome = iota
	// orphanUnknown: presence or the cancellation failed; ask again later,
	// never cancel on a doubt.
	orphanUnknown
	// orphanCancelled: nobody followed; the stream was cancelled.
	orphanCancelled
	// orphanEnded: nobody followed, and the stream had ended.
	orphanEnded
	// orphanGone: the stream's metadata expired.
	orphanGone
	numOrphanOutcomes
)

func newOrphans(
	followed func(ctx context.Context, id string) (bool, error),
	cancel func(ctx context.Context, tenant, id string) (chunklog.Entry, *wire.Error),
	log *slog.Logger,
) *orphans {
	ctx, stop := context.WithCancel(context.Background())
	return &orphans{
		followed: followed, cancel: cancel, log: log,
		ctx: ctx, stop: stop, pending: map[*time.Timer]struct{}{},
	}
}

// watch is told that the client that started stream id left before the
// end. Under cancel_after it checks the stream after the duration; under
// continue it does nothing.
func (o *orphans) watch(tenant, id string, p DisconnectPolicy) {
	o.stats.left.Add(1)
	if p.CancelAfter <= 0 {
		return
	}
	o.stats.watched.Add(1)
	o.log.Debug("client left; watching the stream", "stream_id", id, "policy", p.String())
	o.schedule(tenant, id, p.CancelAfter)
}

func (o *orphans) schedule(tenant, id string, after time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return
	}
	o.running.Add(1)
	var t *time.Timer
	t = time.AfterFunc(after, func() {
		defer o.running.Done()
		o.mu.Lock()
		delete(o.pending, t)
		o.mu.Unlock()
		if out := o.check(tenant, id); out == orphanFollowed || out == orphanUnknown {
			o.schedule(tenant, id, after)
		}
	})
	o.pending[t] = struct{}{}
}

// check asks whether stream id is followed and cancels it if not.
func (o *orphans) check(tenant, id string) orphanOutcome {
	out := o.decide(tenant, id)
	o.stats.checks[out].Add(1)
	return out
}

func (o *orphans) decide(tenant, id string) orphanOutcome {
	ctx, cancel := context.WithTimeout(o.ctx, natsTimeout)
	defer cancel()
	followed, err := o.followed(ctx, id)
	switch {
	case err != nil:
		if o.ctx.Err() == nil {
			o.log.Warn("disconnect policy: presence unknown", "stream_id", id, "err", err)
		}
		return orphanUnknown
	case followed:
		return orphanFollowed
	}
	tail, e := o.cancel(ctx, tenant, id)
	switch {
	case e != nil && e.Status == http.StatusNotFound:
		return orphanGone
	case e != nil:
		if o.ctx.Err() == nil {
			o.log.Warn("disconnect policy: cancel failed", "stream_id", id, "err", e.Message)
		}
		return orphanUnknown
	case tail.Frame.Kind == wire.KindEnd:
		return orphanEnded
	}
	o.log.Info("cancelled a stream nobody follows", "stream_id", id)
	return orphanCancelled
}

// close drops the pending timers and waits for running checks, which it
// ends early. It is idempotent.
func (o *orphans) close() {
	o.mu.Lock()
	o.closed = true
	for t := range o.pending {
		if t.Stop() {
			o.running.Done()
		}
		delete(o.pending, t)
	}
	o.mu.Unlock()
	o.stop()
	o.running.Wait()
}
