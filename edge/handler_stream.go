package edge

import (
	"context"
	"errors"
	"net/http"

	"github.com/relaydev/relay/relay/metrics"
	"github.com/relaydev/relay/relay/protocol"
)

// handleStream serves GET /v1/streams/{id}: the stream as server-sent
// events after the client's cursor, live until the end frame. The cursor is
// the Last-Event-ID header an EventSource sends when it reconnects, or the
// last_event_id query parameter for a first connection; the header wins.
// Only the stream's tenant may read it (a resume token in ?token= names
// the tenant for a client that cannot send a key); to anyone else it
// answers 404, like an unknown stream.
func (s *Server) handleStream(w http.ResponseWriter, r *http.Request) {
	cursor, cursorParam := requestCursor(r)
	o, e := s.open(r.Context(), principalOf(r).tenant, r.PathValue("id"), "id", cursor, cursorParam)
	s.obs.resume(cursor, e)
	if e != nil {
		writeError(w, e)
		return
	}
	s.serveSSE(w, r, o)
}

// requestCursor is the cursor a GET /v1/streams/{id} resumes after, and
// the parameter it came from: the Last-Event-ID header, else the
// last_event_id query parameter.
func requestCursor(r *http.Request) (cursor, param string) {
	if c := r.Header.Get("Last-Event-ID"); c != "" {
		return c, "Last-Event-ID"
	}
	return r.URL.Query().Get("last_event_id"), "last_event_id"
}

// serveSSE streams the frames after o.after as server-sent events until the
// end frame (then "data: [DONE]"), the client leaves, or the edge stops
// (then a last event tells the client to reconnect). It reports whether
// the client left before the end, which the disconnect policy acts on.
func (s *Server) serveSSE(w http.ResponseWriter, r *http.Request, o origin) (left bool) {
	sess := s.sseSession(r, o, metrics.TransportSSE)
	defer sess.close()
	out := newSSEWriter(w)
	if o.end != nil {
		out.start(s.cfg.RetryHint)
		out.done()
		out.flush()
		return false
	}
	ctx, done := s.clients.add(r.Context(), clientSSE)
	defer done()
	f, err := s.follow(o)
	if err != nil {
		writeError(w, unavailable("following the stream", err))
		return false
	}
	defer f.close()
	out.start(s.cfg.RetryHint)
	if err := out.flush(); err != nil {
		return !errors.Is(context.Cause(ctx), errShuttingDown)
	}
	// The first event carries the view's resume token, if any.
	v := o.view
	for {
		entries, err := f.next(ctx, s.cfg.Keepalive)
		sess.delivered(entries)
		for _, e := range entries {
			out.event(cursorOf(e).String(), marshal(v.object(e)))
			v.resumeToken = ""
		}
		switch {
		case f.ended():
			out.done()
		case err != nil:
			if r.Context().Err() != nil {
				return true
			}
			if errors.Is(err, errShuttingDown) {
				out.retry(s.cfg.RetryHint)
				out.event("", drainingEvent())
				break
			}
			s.log.Warn("stream interrupted", "stream_id", o.view.id, "err", err)
			out.event("", interrupted(err))
		case len(entries) == 0:
			out.keepalive()
		}
		werr := out.flush()
		switch {
		case f.ended():
			return false
		case err != nil:
			return false // told to reconnect
		case werr != nil:
			// The client is gone, or too slow to take a batch within
			// writeTimeout; either way it left, unless the edge is
			// ending the response.
			return !errors.Is(context.Cause(ctx), errShuttingDown)
		}
	}
}

// interrupted is the data of the event that ends a response the edge could
// not finish because it lost the log. It has no id, so an EventSource
// reconnects after the last frame it got; an SDK raises it as an error
// rather than returning a cut answer.
func interrupted(cause error) []byte {
	return marshal(struct {
		Error errorObject `json:"error"`
	}{newErrorObject(&protocol.Error{Message: cause.Error(), Type: protocol.TypeServer, Code: CodeInterrupted})})
}
