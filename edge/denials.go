package edge

import (
	"context"
	"errors"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"
)

// denials hands the NATS server's permission violations on one connection
// to the reads they concern. The server denies a subject at once, with an
// -ERR the client passes to its async error handler only: a request to a
// denied subject gets no reply, and would wait out its whole timeout.
// A read that registers with watch ends at the denial instead.
type denials struct {
	mu      sync.Mutex
	waiters map[*denialWaiter]struct{}
}

type denialWaiter struct {
	concerns func(violation string) bool
	cancel   context.CancelCauseFunc
}

// watchDenials chains onto nc's async error handler, which keeps running.
func watchDenials(nc *nats.Conn) *denials {
	d := &denials{waiters: map[*denialWaiter]struct{}{}}
	prev := nc.ErrorHandler()
	nc.SetErrorHandler(func(c *nats.Conn, sub *nats.Subscription, err error) {
		if prev != nil {
			prev(c, sub, err)
		}
		if errors.Is(err, nats.ErrPermissionViolation) {
			d.denied(err)
		}
	})
	return d
}

// watch returns a context that ends, with the violation as its cause, when
// the server denies a subject that concerns accepts (it is given the
// server's message, which names the subject). Call stop when done.
func (d *denials) watch(ctx context.Context, concerns func(violation string) bool) (_ context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	w := &denialWaiter{concerns: concerns, cancel: cancel}
	d.mu.Lock()
	d.waiters[w] = struct{}{}
	d.mu.Unlock()
	return ctx, func() {
		d.mu.Lock()
		delete(d.waiters, w)
		d.mu.Unlock()
		cancel(nil)
	}
}

func (d *denials) denied(err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for w := range d.waiters {
		if w.concerns(err.Error()) {
			w.cancel(err)
		}
	}
}

// mentionsBucket reports whether a violation names a subject of one of
// the KV buckets: its API ("…KV_<bucket>…") or its keys ("$KV.<bucket>.…").
func mentionsBucket(buckets ...string) func(string) bool {
	return func(violation string) bool {
		for _, b := range buckets {
			if strings.Contains(violation, "KV_"+b) || strings.Contains(violation, "$KV."+b+".") {
				return true
			}
		}
		return false
	}
}
