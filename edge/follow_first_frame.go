package edge

import (
	"errors"
	"net/http"
	"time"

	"github.com/relaydev/relay/relay/dialect/chat"
	"github.com/relaydev/relay/relay/wire"
)

// # Holding a streamed response until its first frame
//
// A provider refuses a request (400, 404, 422, ...) before its first token,
// and the worker stores the refusal as the stream's failed end frame. SDKs
// raise the error a status means (BadRequestError for a 400) only from the
// response's HTTP status, never from an event after a 200. So a streamed
// POST (/v1/chat/completions, /v1/responses) is answered once its first
// frame is stored: a failed end with its error and status, anything else
// with the event stream, beginning with that frame. The first token
// reaches the client as soon as it would otherwise; what waits is the
// response head, and a client that drops before it learns no stream id
// (with an Idempotency-Key, its retry attaches to the stream).
//
// A chat completion holds its head only for a refusal: a failed end whose
// status is one a provider gives a request it will never serve (400, 404,
// 413, 422). Any other failure (a provider down, retries spent) stays a
// 200 and an error event: as an HTTP 5xx an SDK would retry it on its own,
// and a provider's 401 is about the relay's key, not the client's. It
// waits for its head at most headHoldMax (or one keepalive interval, if
// shorter): a request queued for a paused or rate-limited provider may
// wait a minute, a reasoning model may think for long before its first
// token, and a proxy cuts a connection that stays silent long. Past that,
// the head goes out and keepalives flow; a refusal after it is an error
// event after the 200. Providers refuse well within it.

// headHold is how a dialect holds a streamed response's head.
type headHold struct {
	// untilKeepalive: stop holding after headHoldMax or one keepalive
	// interval, the shorter, without a frame; otherwise hold until the
	// first frame.
	untilKeepalive bool
	// refusalsOnly: answer only a refusal (isRefusal) as an HTTP error;
	// otherwise any failed end.
	refusalsOnly bool
}

// headHoldMax bounds how long a chat completion's head waits for the
// first frame.
const headHoldMax = 2 * time.Second

// chatHold is how a chat completion holds its head.
var chatHold = headHold{untilKeepalive: true, refusalsOnly: true}

// isRefusal reports whether e is a provider's refusal of the request
// itself, which no retry changes.
func isRefusal(e *wire.Error) bool {
	if e == nil {
		return false
	}
	switch e.Status {
	case http.StatusBadRequest, http.StatusNotFound, http.StatusRequestEntityTooLarge, http.StatusUnprocessableEntity:
		return true
	}
	return false
}

// awaitFirstFrame reads o's first frames from its follower (a new one for
// a replay, which has none yet). It returns o with them in o.read, or
// answers the client itself (a refusal, the edge draining, the log lost)
// and reports answered; gone reports that the client left meanwhile. Once
// answered, the follower is closed. h says how long it holds and which
// failures it answers.
func (s *Server) awaitFirstFrame(w http.ResponseWriter, r *http.Request, o origin, h headHold) (_ origin, answered, gone bool) {
	f, err := s.follow(o)
	if err != nil {
		writeError(w, unavailable("following the stream", err))
		return o, true, false
	}
	o.f = f
	ctx, done := s.clients.add(r.Context(), clientUnary)
	defer done()
	idle := s.cfg.Keepalive
	if h.untilKeepalive {
		idle = min(idle, headHoldMax)
	}
	for {
		entries, err := o.f.Next(ctx, idle)
		if err == nil && len(entries) == 0 {
			if h.untilKeepalive {
				return o, false, false // the head goes, keepalives follow
			}
			continue // idle: no byte may go before the head
		}
		if err == nil {
			if first := entries[0].Frame; first.Kind == wire.KindEnd && first.Status == wire.StatusFailed &&
				(!h.refusalsOnly || isRefusal(first.Error)) {
				o.f.Close()
				writeError(w, chat.EndError(first))
				return o, true, false
			}
			o.read = entries
			return o, false, false
		}
		o.f.Close()
		switch {
		case r.Context().Err() != nil:
			return o, true, true
		case errors.Is(err, errShuttingDown):
			writeDraining(w, s.cfg.RetryHint, drainMessage)
		default:
			s.log.Warn("stream interrupted before its first frame", "stream_id", o.stream.ID, "err", err)
			e := interruptedError()
			e.Status = http.StatusBadGateway
			writeError(w, e)
		}
		return o, true, false
	}
}
