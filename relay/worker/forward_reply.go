package worker

import (
	"cmp"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/relaydev/relay/relay/wire"
)

// forwardReply sends the messages of one forwarded request's answer to
// the edge's reply subject, numbered in the order they are published (see
// wire.ForwardKind). It is safe for concurrent use: the heartbeat shares
// it with the job.
type forwardReply struct {
	nc      *nats.Conn
	subject string
	// inbox, once watch set it, is the reply subject of every message:
	// see watch.
	inbox string

	mu   sync.Mutex
	seq  int
	last time.Time // of the last message sent
	err  error     // the first publish that failed
}

func newForwardReply(nc *nats.Conn, subject string) *forwardReply {
	return &forwardReply{nc: nc, subject: subject}
}

// send publishes one message of kind, and reports the first publish error
// of the reply: every later message but the end is then dropped, and the
// end takes the failed message's number, so the edge learns why.
func (r *forwardReply) send(kind wire.ForwardKind, data []byte) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil && kind != wire.ForwardEndKind {
		return r.err
	}
	msg := &nats.Msg{Subject: r.subject, Reply: r.inbox, Data: data, Header: nats.Header{}}
	msg.Header.Set(wire.HeaderForwardKind, string(kind))
	msg.Header.Set(wire.HeaderForwardSeq, strconv.Itoa(r.seq))
	if err := r.nc.PublishMsg(msg); err != nil {
		r.err = cmp.Or(r.err, err)
		return err
	}
	r.seq++
	r.last = time.Now()
	return nil
}

// sendJSON publishes v, which marshals (a head or an end), as kind.
func (r *forwardReply) sendJSON(kind wire.ForwardKind, v any) error {
	return r.send(kind, mustJSON(v))
}

// end publishes the last message.
func (r *forwardReply) end(e wire.ForwardEnd) {
	_ = r.sendJSON(wire.ForwardEndKind, e)
}

// watch calls gone once the edge stopped listening (its client left, or
// it took this worker for lost): every later message is published with a
// reply subject of the worker's, so NATS answers one that nobody receives
// with a no-responders status there. Heartbeats keep that within one
// ForwardHeartbeat. The watch ends with stop.
func (r *forwardReply) watch(gone func()) (stop func(), err error) {
	inbox := r.nc.NewInbox()
	sub, err := r.nc.Subscribe(inbox, func(msg *nats.Msg) {
		if len(msg.Data) == 0 && msg.Header.Get("Status") == "503" {
			gone()
		}
	})
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.inbox = inbox
	r.mu.Unlock()
	return func() { _ = sub.Unsubscribe() }, nil
}

// beat sends wire.ForwardAlive whenever nothing else was sent for a
// heartbeat, until the returned stop is called.
func (r *forwardReply) beat() (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(wire.ForwardHeartbeat / 2)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			r.mu.Lock()
			quiet := time.Since(r.last) >= wire.ForwardHeartbeat/2
			r.mu.Unlock()
			if quiet {
				_ = r.send(wire.ForwardAlive, nil)
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

// pieces cuts b for messages of at most size bytes; an empty b is one
// empty piece, so a body message is always sent.
func pieces(b []byte, size int) [][]byte {
	if len(b) == 0 {
		return [][]byte{b}
	}
	var out [][]byte
	for len(b) > size {
		out = append(out, b[:size])
		b = b[size:]
	}
	return append(out, b)
}
