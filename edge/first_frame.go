package edge

import (
	"errors"
	"net/http"

	"github.com/relaydev/relay/relay/wire"
)

// # Holding a streamed response until its first frame
//
// A provider refuses a request (400, 404, 422, ...) before its first token,
// and the worker stores the refusal as the stream's failed end frame. SDKs
// raise the error a status means (BadRequestError for a 400) only from the
// response's HTTP status, never from an event after a 200. So a streamed
// POST /v1/responses is answered once its first frame is stored: a failed
// end with its error and status, anything else with the event stream,
// beginning with that frame. The first token reaches the client as soon
// as it would otherwise; what waits is the response head, and a client
// that drops before it learns no stream id (with an Idempotency-Key, its
// retry attaches to the stream).

// awaitFirstFrame reads o's first frames from its follower (a new one for
// a replay, which has none yet). It returns o with them in o.read, or
// answers the client itself (a refusal, the edge draining, the log lost)
// and reports answered; gone reports that the client left meanwhile. Once
// answered, the follower is closed.
func (s *Server) awaitFirstFrame(w http.ResponseWriter, r *http.Request, o origin) (_ origin, answered, gone bool) {
	f, err := s.follow(o)
	if err != nil {
		writeError(w, unavailable("following the stream", err))
		return o, true, false
	}
	o.f = f
	ctx, done := s.clients.add(r.Context(), clientUnary)
	defer done()
	for {
		entries, err := o.f.next(ctx, s.cfg.Keepalive)
		if err == nil && len(entries) == 0 {
			continue // idle: no byte may go before the head
		}
		if err == nil {
			if first := entries[0].Frame; first.Kind == wire.KindEnd && first.Status == wire.StatusFailed {
				o.f.close()
				writeError(w, endError(first))
				return o, true, false
			}
			o.read = entries
			return o, false, false
		}
		o.f.close()
		switch {
		case r.Context().Err() != nil:
			return o, true, true
		case errors.Is(err, errShuttingDown):
			writeDraining(w, s.cfg.RetryHint, drainMessage)
		default:
			s.log.Warn("stream interrupted before its first frame", "stream_id", o.view.id, "err", err)
			writeError(w, &wire.Error{Message: err.Error(), Type: wire.TypeServer, Code: CodeInterrupted, Status: http.StatusBadGateway})
		}
		return o, true, false
	}
}
