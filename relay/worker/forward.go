package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/relaydev/relay/relay/fleet/slots"
	"github.com/relaydev/relay/relay/wire"
)

// forwards serves the requests the relay forwards without a durable stream
// (wire.ForwardSubject: embeddings, legacy completions). The worker takes
// them from a queue-group subscription, next to its generation slots, at
// most max_inflight at a time, shared between the tenants as the edges
// share the generation slots (slots.Admit): one slot is kept for a tenant
// that runs none, and beyond it a tenant takes a slot only below its fair
// share of them, so one tenant's slow requests cannot hold them all. One
// it has no room for is answered as retryable at once, and the edge sends
// it to another worker. They share
// the generations' route, keys and gate (forward_call.go); nothing of them
// is stored, so a worker that stops ends them, and the edge retries those
// that had not answered yet.
type forwards struct {
	w      *Worker
	sub    *nats.Subscription
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once
	// mu orders take's start of a request before stop's wait; stopped
	// says stop began, after which nothing starts.
	mu      sync.Mutex
	stopped bool
	// slots is how many requests may run at once; running counts those
	// that do, by tenant, and total all of them.
	slots   int
	running map[string]slots.Tenant
	total   int
}

// followForwards subscribes to forwarded requests; they run under ctx.
func (w *Worker) followForwards(ctx context.Context) (*forwards, error) {
	f := &forwards{w: w, slots: w.maxInflight, running: map[string]slots.Tenant{}}
	f.ctx, f.cancel = context.WithCancel(ctx)
	sub, err := w.nc.QueueSubscribe(wire.ForwardSubject, wire.ForwardQueue, f.take)
	if err != nil {
		f.cancel()
		return nil, fmt.Errorf("worker: subscribe to %s: %w", wire.ForwardSubject, err)
	}
	f.sub = sub
	return f, nil
}

// unsubscribe stops taking requests; those running go on.
func (f *forwards) unsubscribe() {
	f.once.Do(func() {
		if err := f.sub.Unsubscribe(); err != nil {
			f.w.logger.Debug("unsubscribe from forwarded requests", "err", err)
		}
	})
}

// stop stops taking requests, lets those running finish within grace, then
// ends the rest (their edges retry them elsewhere if they can) and waits.
func (f *forwards) stop(grace time.Duration) {
	f.unsubscribe()
	// A message being handed to take as the subscription ends still is.
	f.mu.Lock()
	f.stopped = true
	f.mu.Unlock()
	done := make(chan struct{})
	go func() { f.wg.Wait(); close(done) }()
	t := time.NewTimer(max(grace, 0))
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
	f.cancel()
	<-done
}

// take starts serving one request message, called on the subscription's
// goroutine: it must not block.
func (f *forwards) take(msg *nats.Msg) {
	if !wire.IsForwardReplySubject(msg.Reply) {
		f.w.logger.Warn("dropping a forwarded request without a valid reply subject", "reply", msg.Reply)
		return
	}
	out := newForwardReply(f.w.nc, msg.Reply)
	var req wire.ForwardRequest
	if err := json.Unmarshal(msg.Data, &req); err != nil || req.Model == "" || len(req.Body) == 0 || !forwardable(req) {
		out.end(wire.ForwardEnd{Error: badBody("the forwarded request is malformed")})
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.total >= f.slots || !slots.Admit(f.slots, f.total, f.running, req.Tenant) {
		out.end(wire.ForwardEnd{Retryable: true, Error: &wire.Error{
			Message: "The worker is busy.", Type: wire.TypeServer, Status: http.StatusServiceUnavailable,
		}})
		return
	}
	if f.stopped {
		out.end(wire.ForwardEnd{Retryable: true, Error: &wire.Error{
			Message: "The worker is stopping.", Type: wire.TypeServer, Code: wire.CodeWorkerLost, Status: http.StatusServiceUnavailable,
		}})
		return
	}
	f.hold(req.Tenant, 1)
	f.wg.Go(func() {
		defer func() {
			f.mu.Lock()
			f.hold(req.Tenant, -1)
			f.mu.Unlock()
		}()
		log := f.w.logger.With("forward", req.ID, "endpoint", req.Endpoint, "model", req.Model)
		// A call nobody waits for any more is not worth paying for.
		ctx, cancel := context.WithCancel(f.ctx)
		defer cancel()
		var gone sync.Once
		if unwatch, err := out.watch(func() {
			gone.Do(func() {
				log.Info("the edge stopped listening; ending the forwarded request")
				cancel()
			})
		}); err == nil {
			defer unwatch()
		} else {
			log.Warn("not watching the edge of a forwarded request", "err", err)
		}
		out.send(wire.ForwardAccepted, nil)
		stop := out.beat()
		defer stop()
		fj := &forwardJob{w: f.w, req: req, out: out, log: log}
		out.end(fj.serve(ctx))
	})
}

// hold counts n more requests of tenant running. f.mu is held.
func (f *forwards) hold(tenant string, n int) {
	t := f.running[tenant]
	t.Used += n
	f.total += n
	if t.Used <= 0 {
		delete(f.running, tenant)
		return
	}
	f.running[tenant] = t
}

// forwardable reports whether req names an endpoint the relay forwards,
// streamed only where the API streams: nothing else reaches a provider.
func forwardable(req wire.ForwardRequest) bool {
	switch req.Endpoint {
	case wire.EndpointEmbeddings:
		return !req.Stream
	case wire.EndpointCompletions:
		return true
	}
	return false
}
