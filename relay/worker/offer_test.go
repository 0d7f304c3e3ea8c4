package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/relay/mockupstream"
	"github.com/relaydev/relay/relay/relaytest"
	"github.com/relaydev/relay/relay/runecut"
	"github.com/relaydev/relay/relay/wire"
)

// requestData is the encoded request of stream id, as an edge offers and
// queues it.
func requestData(id, content string) []byte {
	body, _ := json.Marshal(map[string]any{"model": "mock-1", "messages": userMessages(content)})
	data, _ := json.Marshal(wire.Request{StreamID: id, Model: "mock-1", Body: body, Created: time.Now().Unix()})
	return data
}

// offer offers the request of stream id as an edge does until a worker
// takes it (its slots may not have started yet), and returns the taker's
// instance.
func (h *harness) offer(id, content string) string {
	h.t.Helper()
	var taker string
	relaytest.Eventually(h.t, waitFor, 5*time.Millisecond, func() bool {
		taker = h.offerOnce(id, content)
		return taker != ""
	})
	return taker
}

// offerOnce offers the request of stream id once a worker follows offers,
// and returns its answer: the taker's instance, or "" if declined.
func (h *harness) offerOnce(id, content string) string {
	h.t.Helper()
	var reply *nats.Msg
	relaytest.Eventually(h.t, waitFor, 5*time.Millisecond, func() bool {
		var err error
		reply, err = h.nc.Request(wire.OfferSubject, requestData(id, content), 5*time.Second)
		if err != nil && !errors.Is(err, nats.ErrNoResponders) {
			h.t.Fatalf("offer: %v", err)
		}
		return err == nil
	})
	return string(reply.Data)
}

// queueTaken queues the request of stream id naming taker (none if
// empty), as an edge does once a worker took it.
func (h *harness) queueTaken(id, content, taker string) {
	h.t.Helper()
	msg := &nats.Msg{Subject: wire.RequestSubject, Data: requestData(id, content), Header: nats.Header{}}
	if taker != "" {
		msg.Header.Set(wire.HeaderTakenBy, taker)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := h.js.PublishMsg(ctx, msg, jetstream.WithMsgID(id)); err != nil {
		h.t.Fatalf("queue: %v", err)
	}
}

// A request taken from an offer is started before it is queued at all:
// its claim is stored first. Its delivery, which the queue gives to the
// same worker, is adopted by the running job, which acks it at the end:
// one call, one job, the text exact.
//
// Queued without the taker's name (the edge stopped waiting for the
// answer), the delivery is adopted all the same by the worker that took
// it.
func TestOfferedRequestStartsBeforeItIsQueued(t *testing.T) {
	for _, named := range []bool{true, false} {
		t.Run(fmt.Sprintf("named=%v", named), func(t *testing.T) { offeredStartsFirst(t, named) })
	}
}

func offeredStartsFirst(t *testing.T, named bool) {
	h := start(t, setup{mock: mockupstream.Config{Tokens: 5, TokenInterval: 100 * time.Millisecond}})
	id, content := wire.NewStreamID(), "offered"
	taker := h.offer(id, content)
	if !wire.ValidInstance(taker) {
		t.Fatalf("offer answered %q, want the worker's instance", taker)
	}
	// The offer is answered once the claim, which carries the stream's
	// Meta, is stored: the edge stores no Meta record.
	frames := h.frames(id)
	if len(frames) == 0 {
		t.Fatal("the offer was answered before the claim was stored")
	}
	f := frames[0].Frame
	if meta, ok := wire.ClaimMeta(f); f.Worker != "test-worker" || !ok || meta.Model != "mock-1" || meta.Created == 0 {
		t.Fatalf("first frame = %+v, want the worker's claim with the stream's Meta", f)
	}
	if !named {
		taker = ""
	}
	h.queueTaken(id, content, taker)
	frames = h.waitEnd(id)
	text, _ := chunkText(t, frames)
	if want := mockupstream.AnswerText(userMessages(content), 5); text != want {
		t.Fatalf("text = %q\nwant   %q", text, want)
	}
	if status := h.waitJob(id); status != "done" {
		t.Fatalf("job ended %s", status)
	}
	h.waitAcked()
	if n := h.jobLines(id); n != 1 {
		t.Fatalf("%d jobs served the stream, want 1", n)
	}
	if n := h.mock.Stats().ChatRequests; n != 1 {
		t.Fatalf("%d upstream calls, want 1", n)
	}
}

// A taken request whose job ended before its delivery came is acked by
// the worker the delivery reached, which finds the end frame.
func TestDeliveryAfterTheTakerEndedIsAcked(t *testing.T) {
	h := start(t, setup{mock: mockupstream.Config{Tokens: 3, TokenInterval: -1}})
	id, content := wire.NewStreamID(), "quick"
	taker := h.offer(id, content)
	h.waitEnd(id)
	relaytest.Eventually(t, waitFor, 5*time.Millisecond, func() bool { return h.jobLines(id) == 1 })
	h.queueTaken(id, content, taker)
	h.waitAcked()
	relaytest.Eventually(t, waitFor, 5*time.Millisecond, func() bool {
		_, ok := h.logs.find(func(l map[string]string) bool {
			return l["msg"] == "job finished" && l["stream"] == id && l["status"] == "already_ended"
		})
		return ok
	})
	if n := h.mock.Stats().ChatRequests; n != 1 {
		t.Fatalf("%d upstream calls, want 1", n)
	}
}

// The worker a taken request is delivered to passes the delivery to the
// taker and does nothing else with it: no call, no frame, no ack. The
// taker acks it on its reply subject.
func TestDeliveryIsPassedToTheTaker(t *testing.T) {
	h := start(t, setup{mock: mockupstream.Config{Tokens: 3, TokenInterval: -1}})
	passed := make(chan *nats.Msg, 1)
	sub, err := h.nc.ChanSubscribe(wire.AdoptSubject("taker-1"), passed)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	id := wire.NewStreamID()
	h.queueTaken(id, "elsewhere", "taker-1")
	var m *nats.Msg
	select {
	case m = <-passed:
	case <-time.After(waitFor):
		t.Fatal("the delivery was not passed on")
	}
	var d wire.Delivery
	if err := json.Unmarshal(m.Data, &d); err != nil || d.StreamID != id || d.Seq == 0 || d.Delivered != 1 || d.Reply == "" {
		t.Fatalf("passed %s (%v), want the first delivery of %s", m.Data, err, id)
	}
	if err := m.Respond([]byte("1")); err != nil {
		t.Fatal(err)
	}
	if unacked, _ := h.ackPending(); unacked != 1 {
		t.Fatalf("%d deliveries unacked, want the one passed on", unacked)
	}
	if _, err := h.nc.Request(d.Reply, []byte("+ACK"), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	h.waitAcked()
	if frames := h.frames(id); len(frames) != 0 {
		t.Fatalf("the worker wrote %d frames to a stream it passed on", len(frames))
	}
	if n := h.mock.Stats().ChatRequests; n != 0 {
		t.Fatalf("%d upstream calls, want none", n)
	}
}

// A delivery whose taker is gone (nobody answers for it) is served by the
// worker it reached, which reads the stream first: here the gone taker
// had published part of the answer, and the text goes on from it.
func TestDeliveryOfAGoneTakerIsServed(t *testing.T) {
	h := start(t, setup{mock: mockupstream.Config{Tokens: 6, TokenInterval: -1}})
	id, content := wire.NewStreamID(), "orphaned"
	want := mockupstream.AnswerText(userMessages(content), 6)
	if err := h.appendFrames(id,
		wire.Frame{Kind: wire.KindClaim, Worker: "gone"},
		wire.Frame{Kind: wire.KindChunk, Role: "assistant", Content: want[:runecut.Len([]byte(want), len(want)/2)], Provider: "mock", Model: "mock-1", Attempt: 1},
	); err != nil {
		t.Fatal(err)
	}
	h.queueTaken(id, content, "gone")
	frames := h.waitEnd(id)
	text, _ := chunkText(t, frames)
	if text != want {
		t.Fatalf("text = %q\nwant   %q", text, want)
	}
	if f := frames[2].Frame; f.Kind != wire.KindClaim || f.Worker != "test-worker" {
		t.Fatalf("frame after the gone taker's = %+v, want the worker's claim", f)
	}
	h.waitAcked()
}

// A worker adopts the delivery of a request it took when another worker
// passes it on, keeps it in progress and acks it on its reply subject when
// the stream ends; it adopts it once.
func TestTakerAdoptsAPassedDelivery(t *testing.T) {
	h := start(t, setup{mock: mockupstream.Config{Tokens: 4, TokenInterval: 100 * time.Millisecond}})
	id := wire.NewStreamID()
	taker := h.offer(id, "adopt me")
	reply := "test.acks." + id
	acks := make(chan *nats.Msg, 16)
	sub, err := h.nc.ChanSubscribe(reply, acks)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	d, _ := json.Marshal(wire.Delivery{StreamID: id, Reply: reply, Seq: 7, Delivered: 1})
	pass := func() string {
		m, err := h.nc.Request(wire.AdoptSubject(taker), d, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		return string(m.Data)
	}
	if got := pass(); got != "1" {
		t.Fatalf("pass answered %q, want adopted", got)
	}
	if got := pass(); got != "" {
		t.Fatalf("second pass answered %q, want refused", got)
	}
	h.waitEnd(id)
	for {
		select {
		case m := <-acks:
			if string(m.Data) == "+WPI" {
				continue
			}
			if string(m.Data) != "+ACK" || m.Reply == "" {
				t.Fatalf("got %q on the reply subject, want a double ack", m.Data)
			}
			if err := m.Respond(nil); err != nil {
				t.Fatal(err)
			}
			return
		case <-time.After(waitFor):
			t.Fatal("the adopted delivery was not acked")
		}
	}
}

// An offer is taken only by a slot free to run it at once: with five
// slots, four of them waiting in pulls, the first offer is taken and the
// second, while the first runs, declined.
func TestOfferDeclinedWithoutAFreeSlot(t *testing.T) {
	h := start(t, setup{mock: mockupstream.Config{Tokens: 3, TokenInterval: -1}, noWorker: true})
	h.startWorker(Config{MaxInflight: maxWaitingPulls + 1}, nil)
	held := wire.NewStreamID()
	h.offer(held, "[[mock: first_token_after=1h]] held")
	if got := h.offerOnce(wire.NewStreamID(), "second"); got != "" {
		t.Fatalf("second offer answered %q, want declined", got)
	}
}

// discardAcks is a delivery whose acknowledgements go nowhere.
type discardAcks struct{}

func (discardAcks) InProgress() error                   { return nil }
func (discardAcks) DoubleAck(ctx context.Context) error { return nil }

// A delivery passed on between the offer's answer and the job's start
// waits for the job, which adopts it when its slot adds it, once; one
// passed on for an offer whose job never started is returned to be given
// back.
func TestDeliveryPassedBeforeTheJobStartsWaitsForIt(t *testing.T) {
	kept := 0
	in := newInflight(func(ackable) func() { kept++; return func() {} })
	in.expect("s1")
	d := wire.Delivery{StreamID: "s1", Reply: "reply.1", Seq: 3, Delivered: 1}
	if !in.adopt(d, discardAcks{}) {
		t.Fatal("the delivery of a taken offer was refused before its job started")
	}
	if in.adopt(d, discardAcks{}) {
		t.Fatal("a second delivery was adopted")
	}
	j := &job{req: wire.Request{StreamID: "s1", Tenant: "t1"}, offered: true, stopProgress: func() {}}
	in.add(j)
	if j.msg == nil || j.delivery.Seq != 3 || j.delivery.Tenant != "t1" || kept != 1 {
		t.Fatalf("job holds %+v (kept %d), want the delivery passed on, kept in progress", j.delivery, kept)
	}
	if got := in.deliveries(); len(got) != 1 || got[0].Reply != "reply.1" {
		t.Fatalf("heartbeat lists %+v", got)
	}
	if in.adopt(d, discardAcks{}) {
		t.Fatal("a job adopted a second delivery")
	}

	in.expect("s2")
	d2 := wire.Delivery{StreamID: "s2", Reply: "reply.2", Seq: 4, Delivered: 1}
	if !in.adopt(d2, discardAcks{}) {
		t.Fatal("refused")
	}
	if back := in.drop("s2"); back != d2 {
		t.Fatalf("dropped offer gave back %+v, want %+v", back, d2)
	}
	if in.adopt(d2, discardAcks{}) {
		t.Fatal("a dropped offer adopted a delivery")
	}
}

// An offer is answered once the job's claim is stored, so one whose claim
// is refused (the stream already holds a frame: a request queued twice)
// is answered with nothing, and the edge queues the request naming no
// taker; the job that took it ends fenced.
func TestOfferWhoseClaimFailsIsNotTaken(t *testing.T) {
	h := start(t, setup{mock: mockupstream.Config{Tokens: 3, TokenInterval: -1}})
	id := wire.NewStreamID()
	other := wire.ClaimFrame("other-worker", &wire.Request{StreamID: id, Model: "mock-1", Created: time.Now().Unix()})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := h.js.Publish(ctx, wire.ChunkSubject(id), other.Encode(), jetstream.WithExpectLastSequencePerSubject(0)); err != nil {
		t.Fatal(err)
	}
	// A worker just started declines offers until a slot waits to pull
	// (answered nothing too): the offer is made again until a job took
	// it, and every answer must be nothing.
	relaytest.Eventually(t, waitFor, 20*time.Millisecond, func() bool {
		if got := h.offerOnce(id, "twice"); got != "" {
			t.Fatalf("offer answered %q though its claim was refused, want nothing", got)
		}
		_, ok := h.logs.find(func(l map[string]string) bool { return l["msg"] == "job finished" && l["stream"] == id })
		return ok
	})
	if status := h.waitJob(id); status != "fenced" {
		t.Fatalf("job ended %s, want fenced", status)
	}
}

// TestRequestOfADurableStreamIsRefused: a worker takes only requests whose
// stream is a generation's; one naming a Durable Stream's id (an edge's to
// write) is refused before any frame, as a malformed id is.
func TestRequestOfADurableStreamIsRefused(t *testing.T) {
	if _, err := decodeRequest(requestData(wire.NewStreamIDIn(1), "hi")); err != nil {
		t.Fatalf("a generation's request: %v", err)
	}
	for _, id := range []string{wire.NewStreamIDIn(wire.DurablePartition(0)), wire.NewStreamIDIn(wire.DurablePartition(wire.MaxPartitions - 1)), "s.forged"} {
		if _, err := decodeRequest(requestData(id, "hi")); err == nil {
			t.Errorf("a request of stream %q was taken", id)
		}
	}
}
