package edge

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/relaydev/relay/relay/dialect/chat"
	"github.com/relaydev/relay/relay/wire"
)

// forwardTries bounds how many workers a forwarded request is sent to: a
// worker that is gone, stopping or full before any of the answer reached
// the client passes it on to the next try.
const forwardTries = 3

// forwardHeadroom is the room kept in a request message for its headers.
const forwardHeadroom = 1 << 10

// forwardRetryDelay spaces the tries after nobody answered (no worker
// subscribed: they may be restarting).
const forwardRetryDelay = 250 * time.Millisecond

// forward sends req to a worker and passes its answer to the client (see
// wire.ForwardRequest for the protocol). A request larger than a NATS
// message gets a 413.
func (s *Server) forward(w http.ResponseWriter, r *http.Request, req wire.ForwardRequest) {
	data, err := json.Marshal(req)
	if err != nil {
		panic("edge: encode forwarded request: " + err.Error())
	}
	// The envelope and the headers of the message need room too.
	if limit, overhead := s.nc.MaxPayload()-forwardHeadroom, int64(len(data)-len(req.Body)); int64(len(data)) > limit {
		writeError(w, &wire.Error{
			Message: fmt.Sprintf("The request is %d bytes; the relay forwards requests of at most %d bytes.", len(req.Body), limit-overhead),
			Type:    wire.TypeInvalidRequest,
			Code:    wire.CodeForwardTooLarge,
			Status:  http.StatusRequestEntityTooLarge,
		})
		return
	}
	var last *wire.Error
	for try := range forwardTries {
		x := &exchange{s: s, w: w, stream: req.Stream}
		again, e := x.run(r.Context(), data)
		if !again {
			return
		}
		last = e
		if try+1 == forwardTries {
			break
		}
		s.log.Info("forwarded request passed to another worker", "id", req.ID, "try", try+1, "why", e.Message)
		if e == errNoWorker {
			t := time.NewTimer(forwardRetryDelay * time.Duration(try+1))
			select {
			case <-r.Context().Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
	}
	writeError(w, last)
}

// errNoWorker is the error of a try nobody took.
var errNoWorker = &wire.Error{
	Message: "No relay worker is subscribed to take the request.",
	Type:    wire.TypeServer,
	Code:    wire.CodeNoWorker,
	Status:  http.StatusServiceUnavailable,
}

// exchange is one try of a forwarded request: its reply subscription and
// what it wrote to the client.
type exchange struct {
	s      *Server
	w      http.ResponseWriter
	stream bool

	seq  int
	head *wire.ForwardHead
	body bytes.Buffer
	// out writes a streamed answer once it started (written).
	out     *sseWriter
	written bool
}

// run publishes the request and serves its reply. It reports whether the
// request should go to another worker (nothing was written to the client),
// with the reason, never nil then.
func (x *exchange) run(ctx context.Context, data []byte) (bool, *wire.Error) {
	subject := wire.ForwardReplySubject(replyToken())
	sub, err := x.s.nc.SubscribeSync(subject)
	if err != nil {
		writeError(x.w, unavailable("subscribing to the reply", err))
		return false, nil
	}
	defer sub.Unsubscribe()
	// The edge reads pieces as fast as they come; the limit only has to
	// hold a whole answer should it fall behind.
	_ = sub.SetPendingLimits(-1, 2*wire.MaxForwardBody)
	if err := x.s.nc.PublishMsg(&nats.Msg{Subject: wire.ForwardSubject, Reply: subject, Data: data}); err != nil {
		writeError(x.w, unavailable("forwarding the request", err))
		return false, nil
	}
	for {
		wait, cancel := context.WithTimeout(ctx, x.s.forwardSilence)
		msg, err := sub.NextMsgWithContext(wait)
		cancel()
		switch {
		case ctx.Err() != nil:
			// The client left; the worker's answer goes nowhere.
			return false, nil
		case errors.Is(err, nats.ErrNoResponders):
			return true, errNoWorker
		case err != nil:
			return x.lost(fmt.Sprintf("no word from the worker for %v", x.s.forwardSilence))
		}
		if seq, _ := strconv.Atoi(msg.Header.Get(wire.HeaderForwardSeq)); seq != x.seq {
			return x.lost(fmt.Sprintf("reply message %d arrived where %d was due", seq, x.seq))
		}
		x.seq++
		again, e, done := x.handle(msg)
		if done {
			return again, e
		}
	}
}

// handle takes one reply message; done says the exchange is over.
func (x *exchange) handle(msg *nats.Msg) (again bool, e *wire.Error, done bool) {
	switch wire.ForwardKind(msg.Header.Get(wire.HeaderForwardKind)) {
	case wire.ForwardHeadKind:
		x.head = new(wire.ForwardHead)
		if json.Unmarshal(msg.Data, x.head) != nil {
			again, e = x.lost("the worker sent a malformed head")
			return again, e, true
		}
		x.body.Grow(x.head.Size)
	case wire.ForwardBody:
		x.body.Write(msg.Data)
	case wire.ForwardEvent:
		x.event(msg.Data)
	case wire.ForwardEndKind:
		var end wire.ForwardEnd
		if json.Unmarshal(msg.Data, &end) != nil {
			again, e = x.lost("the worker sent a malformed end")
			return again, e, true
		}
		again, e = x.end(end)
		return again, e, true
	}
	return false, nil, false
}

// begin writes the headers of a streamed answer, once.
func (x *exchange) begin() {
	if x.written {
		return
	}
	x.written = true
	setSSEHeaders(x.w.Header())
	x.w.WriteHeader(http.StatusOK)
	x.out = &sseWriter{dst: newResponseSink(x.w)}
}

// event writes one event of a streamed answer.
func (x *exchange) event(data []byte) {
	x.begin()
	x.out.event("", data)
	// A client that stopped reading is noticed by the request context.
	_ = x.out.flush()
}

// end finishes the response as the worker's end says.
func (x *exchange) end(end wire.ForwardEnd) (bool, *wire.Error) {
	switch {
	case end.Error != nil && x.written:
		x.cut(end.Error)
	case end.Error != nil && end.Retryable:
		return true, end.Error
	case end.Error != nil:
		writeError(x.w, end.Error)
	case x.head == nil:
		return x.lost("the worker ended without an answer")
	case x.stream:
		x.begin()
		x.out.done()
		_ = x.out.flush()
	case x.body.Len() != x.head.Size:
		return x.lost(fmt.Sprintf("the answer has %d of its %d bytes", x.body.Len(), x.head.Size))
	default:
		h := x.w.Header()
		h.Set("Content-Type", x.head.ContentType)
		h.Set("Content-Length", strconv.Itoa(x.body.Len()))
		x.w.WriteHeader(x.head.Status)
		_, _ = x.w.Write(x.body.Bytes())
	}
	return false, nil
}

// lost ends an exchange whose worker went away or broke the protocol: the
// request goes to another worker if the client has nothing of the answer
// yet, and a streamed answer that started ends with an error event.
func (x *exchange) lost(why string) (bool, *wire.Error) {
	e := &wire.Error{
		Message: "The relay worker serving the request was lost (" + why + ").",
		Type:    wire.TypeServer,
		Code:    wire.CodeWorkerLost,
		Status:  http.StatusBadGateway,
	}
	if !x.written {
		return true, e
	}
	x.cut(e)
	return false, nil
}

// cut ends a streamed answer that started with an error event and no
// [DONE], so the client knows it is not whole.
func (x *exchange) cut(e *wire.Error) {
	x.out.event("", marshal(struct {
		Error chat.Error `json:"error"`
	}{chat.ErrorOf(e)}))
	_ = x.out.flush()
}

// replyToken names one try's reply subject.
func replyToken() string {
	var b [12]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
