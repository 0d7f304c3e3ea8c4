package edge

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/relay/wire"
)

// natsTimeout bounds one NATS round trip (a KV call, a publish, one direct
// get) when the caller's context has no tighter deadline.
const natsTimeout = 5 * time.Second

// submit accepts a validated request as the new stream id (fresh from
// wire.NewStreamID): it offers the request to a worker and queues it for
// the workers, and returns the stream's id and Meta.
//
// A worker that takes the offer answers once its claim frame, which
// carries the Meta, is stored (wire "Offers"). A request no worker took
// needs its Meta stored as a record: a client resuming it finds it while
// it waits in the queue with no frame. The record and the queued request
// are written concurrently, as neither needs the other: the client learns
// the id only when both succeeded, and a worker does not need the record
// to start (it reads it only for a cancellation, which a missing record
// cannot hold). If one write fails for good, the client gets the error
// and the id is never shown to anyone: an orphan record only expires, and
// a queued request without one is generated for no reader (rare: NATS
// failed between two concurrent writes). A write that finds no leader is
// tried again (start_submit_wait.go).
func (s *Server) submit(ctx context.Context, id, tenant string, req chatRequest) (string, wire.Meta, *wire.Error) {
	req = s.downgradeForSpend(ctx, tenant, req) // admit_spend.go
	meta := wire.Meta{Tenant: tenant, Model: req.Model, Created: time.Now().Unix()}
	// Body is JSON the edge parsed, which Encode copies as it is.
	key := principalIn(ctx)
	data := (&wire.Request{
		StreamID:  id,
		Tenant:    tenant,
		Key:       key.key,
		Models:    key.modelList(),
		Model:     req.Model,
		Body:      req.Body,
		Created:   meta.Created,
		FailFast:  req.FailFast,
		RequestID: req.RequestID,
	}).Encode()
	if e := s.checkQueueable(len(data)); e != nil {
		return "", wire.Meta{}, e
	}
	if e := s.admitGeneration(ctx, tenant, req); e != nil { // admit_cluster.go
		return "", wire.Meta{}, e
	}
	undo, e := s.admitStart(ctx, tenant, id, req) // admit_cluster.go
	if e != nil {
		return "", wire.Meta{}, e
	}
	// Both writes wait out an election (start_submit_wait.go).
	ctx, cancel := context.WithTimeout(ctx, submitWait)
	defer cancel()
	msg := &nats.Msg{Subject: wire.RequestSubject, Data: data, Header: traceHeader(ctx, id)}
	takenBy := s.offer(ctx, msg)
	stored := make(chan error, 1)
	if takenBy != "" {
		if msg.Header == nil {
			msg.Header = nats.Header{}
		}
		msg.Header.Set(wire.HeaderTakenBy, takenBy)
		stored <- nil // the claim holds the Meta
	} else {
		// On a runner (relay/runners): a new goroutine would grow its
		// stack by copying as it encodes and publishes, on every request.
		s.runners.Run(func() {
			tried := false
			err := retryLeaderless(ctx, func(ctx context.Context) error {
				err := s.meta.create(ctx, id, meta)
				if tried && errors.Is(err, jetstream.ErrKeyExists) {
					return nil // a try that timed out had stored it
				}
				tried = true
				return err
			})
			if err != nil {
				cancel() // the request is refused: stop queueing it
			}
			stored <- err
		})
	}
	// Nats-Msg-Id queues a retried publish once.
	queueErr := retryLeaderless(ctx, func(ctx context.Context) error {
		_, err := s.js.PublishMsg(ctx, msg, jetstream.WithMsgID(id))
		return err
	})
	storeErr := <-stored
	if storeErr != nil || queueErr != nil {
		undo()
		if takenBy != "" {
			// The worker that took it would answer nobody.
			if err := s.nc.Publish(wire.CancelSubject(id), nil); err != nil {
				s.log.Warn("cancel notice not sent", "stream_id", id, "err", err)
			}
		}
	}
	if storeErr != nil {
		return "", wire.Meta{}, natsWriteError("storing stream metadata", storeErr)
	}
	if queueErr != nil {
		return "", wire.Meta{}, natsWriteError("queueing the request", queueErr)
	}
	return id, meta, nil
}

// offerWait bounds the wait for a worker to answer an offer. A worker
// declines from its subscription at once, and takes an offer once its
// claim is stored, one replicated round; with no worker subscribed NATS
// answers no-responders at once. The bound is only reached when the
// worker that got the offer is stalled, or its claim waits out an
// election. It is generous: a worker
// whose answer comes after it serves a request queued without its name,
// and unless the queue delivers it to that same worker, two workers call
// the provider until one is fenced.
const offerWait = 500 * time.Millisecond

// offer offers the request msg carries to a worker with a free slot
// (wire "Offers") and returns the instance of the worker that took it,
// started it and stored its claim, "" if none did: the request then waits
// in the work queue as any other. A taken request starts one replicated
// round sooner, as its worker does not wait for the queue's consumer to
// record the delivery on a quorum, and needs no Meta record.
func (s *Server) offer(ctx context.Context, msg *nats.Msg) string {
	ctx, cancel := context.WithTimeout(ctx, offerWait)
	defer cancel()
	reply, err := s.nc.RequestMsgWithContext(ctx, &nats.Msg{Subject: wire.OfferSubject, Data: msg.Data, Header: msg.Header})
	if err != nil {
		return ""
	}
	if !wire.ValidInstance(string(reply.Data)) {
		return ""
	}
	return string(reply.Data)
}

// publishHeadroom is what a request message's headers may take besides its
// data (Nats-Msg-Id and the trace context).
const publishHeadroom = 1024

// checkQueueable refuses a request whose message would exceed the NATS
// server's max_payload: a body under edge.max_body_bytes can still be, once
// wrapped in a wire.Request. Checked before anything is written, it gets a
// 413 that says what to change, where the publish would fail with a 503
// that invites a retry (and leave a Meta without a request).
func (s *Server) checkQueueable(size int) *wire.Error {
	max := s.js.Conn().MaxPayload()
	if max <= 0 || int64(size)+publishHeadroom <= max {
		return nil
	}
	e := invalid("", CodeBodyTooLarge, "request too large: it needs %d bytes on the relay's message bus, which takes at most %d (NATS max_payload); send a smaller request", int64(size)+publishHeadroom, max)
	e.Status = http.StatusRequestEntityTooLarge
	return e
}
