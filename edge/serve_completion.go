package edge

import (
	"errors"
	"net/http"

	"github.com/relaydev/relay/relay/chunklog"
	"github.com/relaydev/relay/relay/dialect/chat"
	"github.com/relaydev/relay/relay/metrics"
	"github.com/relaydev/relay/relay/wire"
)

// serveCompletion answers a request with "stream": false. It follows the
// same durable stream as a streaming client and answers once it ended: one
// chat.completion if the stream is done; the end frame's error with its
// status if it failed; and, if it ended incomplete or cancelled, a 200
// chat.completion with the text generated so far, finish_reason null,
// relay.status saying which, and the error that cut it. A cut answer never
// looks finished, and it is no 5xx: SDKs retry those on their own, and a
// retry would pay for the whole answer again. It reports whether the
// client left before the end.
func (s *Server) serveCompletion(w http.ResponseWriter, r *http.Request, o origin) (left bool) {
	var acc chat.Answer
	end, left, ok := s.followToEnd(w, r, o, acc.Add)
	switch {
	case !ok:
		return left
	case end.Frame.Status == wire.StatusFailed:
		e := chat.EndError(end.Frame)
		setRetryAfter(w, e) // admit_cluster.go
		writeJSON(w, e.Status, o.stream.Failure(cursorOf(end), &end.Frame))
	default:
		markCached(w, []chunklog.Entry{end}) // cached.go
		writeJSON(w, http.StatusOK, acc.Completion(o.stream, cursorOf(end), &end.Frame))
	}
	return false
}

// followToEnd follows o for a client that wants the whole answer: it
// passes every chunk to add and returns the end frame. If it cannot reach
// the end, it answers the client (unless the client left: left) and
// reports !ok; an error of add is answered as an interruption.
func (s *Server) followToEnd(w http.ResponseWriter, r *http.Request, o origin, add func(wire.Frame) error) (end chunklog.Entry, left, ok bool) {
	sess := s.sseSession(r, o, metrics.TransportCompletion)
	defer sess.close()
	ctx, done := s.clients.add(r.Context(), clientUnary)
	defer done()
	f, err := s.follow(o)
	if err != nil {
		writeError(w, unavailable("following the stream", err))
		return end, false, false
	}
	defer f.Close()
	for !f.Ended() {
		entries, err := f.Next(ctx, s.cfg.Keepalive)
		sess.delivered(entries)
		for _, e := range entries {
			if e.Frame.Kind == wire.KindEnd {
				end = e
			} else if aerr := add(e.Frame); aerr != nil && err == nil {
				err = aerr
			}
		}
		if err != nil {
			if r.Context().Err() != nil {
				return end, true, false
			}
			if errors.Is(err, errShuttingDown) {
				writeDraining(w, s.cfg.RetryHint, "the edge is shutting down; the answer is still being generated as stream "+
					o.stream.ID+": read it with GET /v1/streams/"+o.stream.ID+" from another edge")
				return end, false, false
			}
			s.log.Warn("completion interrupted", "stream_id", o.stream.ID, "err", err)
			e := interruptedError()
			e.Status = http.StatusBadGateway
			writeError(w, e)
			return end, false, false
		}
	}
	return end, false, true
}
