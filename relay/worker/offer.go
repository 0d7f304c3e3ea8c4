package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/relay/liveness"
	"github.com/relaydev/relay/relay/wire"
)

// Offers (wire "Offers"): an edge offers each request to one worker of a
// queue group before it queues it, and a worker with a slot free takes it
// and starts it at once, without waiting for the work queue's consumer to
// store the delivery on a quorum (one replicated round). The queue still
// delivers the request, to some worker; the edge named the taker in the
// request (wire.HeaderTakenBy), and that worker passes the delivery on to
// the taker, which acks it when the stream ends. Should the taker not
// serve the stream any more, the delivery's worker serves it as any
// delivery: it reads the stream, and finds it ended or continues it.

// offer is a request a worker took from an offer, on its way to a slot.
// msg is the offer, which the job answers once its claim is stored.
type offer struct {
	req wire.Request
	msg *nats.Msg
}

// followOffers takes offered requests for the slots that wait for work
// (slot). An offer a slot takes is answered with the worker's instance
// once the job's claim, which carries the stream's Meta, is stored: the
// edge then stores no Meta record. One that no slot is free for, or whose
// request is malformed, is answered with nothing at once.
// It also adopts the deliveries of the requests it took (adoptPassed).
// stopTaking ends the offers, when the slots stop pulling; stop ends the
// adoptions too, once the jobs are done: until then a job taken from an
// offer may still be passed its delivery.
func (w *Worker) followOffers() (stopTaking, stop func(), err error) {
	// Adoptions first: a worker that took an offer can be passed its
	// delivery.
	adoptions, err := w.nc.Subscribe(wire.AdoptSubject(w.instance), w.adoptPassed)
	if err != nil {
		return nil, nil, fmt.Errorf("worker: subscribe to %s: %w", wire.AdoptSubject(w.instance), err)
	}
	offers, err := w.nc.QueueSubscribe(wire.OfferSubject, wire.OfferQueue, w.takeOffer)
	if err != nil {
		_ = adoptions.Unsubscribe()
		return nil, nil, fmt.Errorf("worker: subscribe to %s: %w", wire.OfferSubject, err)
	}
	var once sync.Once
	stopTaking = func() { once.Do(func() { _ = offers.Unsubscribe() }) }
	return stopTaking, func() {
		stopTaking()
		_ = adoptions.Unsubscribe()
	}, nil
}

// takeOffer hands an offered request to a slot waiting for work, if one
// is, or declines it.
func (w *Worker) takeOffer(m *nats.Msg) {
	req, err := decodeRequest(m.Data)
	if err != nil {
		w.logger.Warn("malformed offer", "err", err)
		w.answer(m, nil)
		return
	}
	// Expected before the answer: its delivery may be passed on before
	// the slot added the job.
	w.jobs.expect(req.StreamID)
	select {
	case w.offers <- offer{req: req, msg: m}:
		w.metrics.Offer(true)
	default:
		w.jobs.drop(req.StreamID)
		w.metrics.Offer(false)
		w.answer(m, nil)
	}
}

// dropOffered forgets a request a slot took from an offer as the worker
// stopped, before its job started, and gives back at once the delivery
// passed on for it meanwhile; one passed on later finds no job, and the
// worker that holds it serves it.
func (w *Worker) dropOffered(o offer) {
	w.answer(o.msg, nil)
	d := w.jobs.drop(o.req.StreamID)
	if d.Reply == "" {
		return
	}
	if err := w.nc.Publish(d.Reply, []byte("-NAK")); err != nil {
		w.logger.Warn("nak of a passed delivery failed", "stream", o.req.StreamID, "err", err)
	}
}

// answer replies to a request a subscription received.
func (w *Worker) answer(m *nats.Msg, data []byte) {
	if err := m.Respond(data); err != nil {
		w.logger.Debug("answer to "+m.Subject+" not sent", "err", err)
	}
}

// adoptPassed adopts a delivery another worker passed on (passOn): the
// job of its stream, started from an offer, acknowledges it.
func (w *Worker) adoptPassed(m *nats.Msg) {
	var d wire.Delivery
	if err := json.Unmarshal(m.Data, &d); err != nil || d.Reply == "" || d.Seq == 0 {
		w.logger.Warn("malformed delivery passed on", "err", err)
		w.answer(m, nil)
		return
	}
	if !w.jobs.adopt(d, passedDelivery{nc: w.nc, reply: d.Reply}) {
		w.answer(m, nil)
		return
	}
	w.answer(m, []byte("1"))
}

// passWait bounds the wait for the taker's answer when a delivery is
// passed on. A live taker answers from its subscription at once, and a
// gone one's missing subscription gets no-responders at once; the bound is
// reached only when the taker is stalled or cut off, and the delivery is
// then served here, which fences it.
const passWait = time.Second

// passOn passes msg, a request's delivery, to the worker that took the
// request from an offer, if the edge named one, and reports whether that
// worker adopted it: this worker then has nothing to do with it. A taker
// adopts one delivery, and only while its job runs: a later one (the
// taker was thought dead and its delivery handed over) is served here. A
// delivery passed to this worker's own job needs no round trip.
//
// It reads only the message's headers: the stream id is its Nats-Msg-Id
// (wire "Protocol flow"), so a request passed on is never decoded here.
func (w *Worker) passOn(msg jetstream.Msg) bool {
	id := msg.Headers().Get(jetstream.MsgIDHeader)
	if !wire.ValidStreamID(id) {
		return false
	}
	// Any delivery, not only the first: one given back by a stopping
	// worker before it passed it on comes again as a redelivery.
	d, err := liveness.DeliveryOf(msg, id)
	if err != nil {
		return false
	}
	taker := msg.Headers().Get(wire.HeaderTakenBy)
	if taker == "" || taker == w.instance {
		// Unnamed, it may still be this worker's: the edge stopped
		// waiting for the answer of an offer this worker took.
		return w.jobs.adopt(d, msg)
	}
	if !wire.ValidInstance(taker) {
		return false
	}
	data, err := json.Marshal(d)
	if err != nil {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), passWait)
	defer cancel()
	reply, err := w.nc.RequestWithContext(ctx, wire.AdoptSubject(taker), data)
	return err == nil && string(reply.Data) == "1"
}

// passedDelivery is a delivery another worker passed on, acknowledged on
// its reply subject as the worker it was delivered to would.
type passedDelivery struct {
	nc    *nats.Conn
	reply string
}

func (p passedDelivery) InProgress() error { return p.nc.Publish(p.reply, []byte("+WPI")) }

func (p passedDelivery) DoubleAck(ctx context.Context) error {
	_, err := p.nc.RequestWithContext(ctx, p.reply, []byte("+ACK"))
	return err
}
