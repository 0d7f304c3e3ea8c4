package edge

import (
	"context"
	"errors"
	"net/http"

	"github.com/relaydev/relay/edge/durable"
	"github.com/relaydev/relay/edge/follow"
	"github.com/relaydev/relay/relay/chunklog"
	"github.com/relaydev/relay/relay/metrics"
	"github.com/relaydev/relay/relay/wire"
)

// handleStream serves GET /v1/streams/{id}: the stream as server-sent
// events after the client's cursor, live until the end frame. The cursor is
// the Last-Event-ID header an EventSource sends when it reconnects, or the
// last_event_id query parameter for a first connection; the header wins.
// Only the stream's tenant may read it (a resume token in ?token= names
// the tenant for a client that cannot send a key); to anyone else it
// answers 404, like an unknown stream.
//
// With ?snapshot=true the frames stored so far come as one chunk
// (follow_snapshot.go).
func (s *Server) handleStream(w http.ResponseWriter, r *http.Request) {
	cursor, cursorParam := requestCursor(r)
	snap, e := durable.WantsSnapshot(r)
	if e != nil {
		writeError(w, e)
		return
	}
	o, e := s.open(r.Context(), principalOf(r).tenant, r.PathValue("id"), "id", cursor, cursorParam)
	s.obs.resume(cursor, e)
	if e != nil {
		writeError(w, e)
		return
	}
	d, e := s.resumeDialect(r.Context(), o, &chatSnapshot{chatEvents: &chatEvents{s: o.stream}}, snap)
	if e != nil {
		writeError(w, e)
		return
	}
	s.serveEvents(w, r, o, nil, d)
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

// serveSSE streams the frames after o.after as chat completion chunks
// (serveEvents).
func (s *Server) serveSSE(w http.ResponseWriter, r *http.Request, o origin, left func()) {
	s.serveEvents(w, r, o, left, &chatEvents{s: o.stream})
}

// serveEvents streams the frames after o.after as server-sent events in
// dialect d until the end frame, the client leaves, or the edge stops
// (then a last event tells the client to reconnect). If the client left
// before the end, left (which may be nil) is called once it is gone: the
// disconnect policy acts on it.
//
// Over HTTP/1.1 the stream takes the connection over from net/http and is
// served by events (serve_sse_conn.go): a waiting stream holds no goroutine and
// no buffer, and left may be called after serveEvents returned. Otherwise
// (HTTP/2, HTTP/1.0, the demo's droppable streams) this goroutine serves it
// to the end.
func (s *Server) serveEvents(w http.ResponseWriter, r *http.Request, o origin, left func(), d eventDialect) {
	sess := s.sseSession(r, o, metrics.TransportSSE)
	if o.end != nil {
		defer sess.close()
		setSSEHeaders(w.Header())
		out := sseWriter{dst: newResponseSink(w)}
		out.start(s.cfg.RetryHint)
		d.begin(&out)
		d.end(&out)
		out.flush()
		return
	}
	f, err := s.follow(o)
	if err != nil {
		sess.close()
		writeError(w, unavailable("following the stream", err))
		return
	}
	setSSEHeaders(w.Header())
	st := &sseStream{s: s, id: o.stream.ID, d: d, f: f, sess: sess, left: left, read: o.read}
	if s.takeOver(w, r, st) {
		return
	}
	ctx, done := s.clients.add(r.Context(), clientSSE)
	st.ctx = ctx
	st.gone = func() bool { return r.Context().Err() != nil }
	st.out.dst = newResponseSink(w)
	over, gone := st.begin()
	for !over {
		entries, err := f.Next(ctx, s.cfg.Keepalive)
		over, gone = st.step(entries, err)
	}
	f.Close()
	done()
	st.finish(gone)
}

// eventDialect renders a stream's frames as one client dialect's events:
// chat completion chunks (chatEvents, chat_events.go) or the Responses API's
// events (responseEvents, responses_events.go).
type eventDialect interface {
	// begin queues what precedes the first frame.
	begin(out *sseWriter)
	// frame queues the events of one frame.
	frame(out *sseWriter, e chunklog.Entry)
	// end queues what follows the end frame's events.
	end(out *sseWriter)
	// cut queues the event that ends a response the edge cannot finish.
	cut(out *sseWriter, e *wire.Error)
}

// pinger is a dialect with a keepalive event of its own (Anthropic's
// ping, messages_events.go); the others get an SSE comment.
type pinger interface{ ping(out *sseWriter) }

// sseStream is one SSE response being served: the stream's id, the
// dialect it is rendered in, its follower and what is written to it.
type sseStream struct {
	s    *Server
	id   string
	d    eventDialect
	f    *follow.Follower
	sess *session
	out  sseWriter
	// ctx ends when the edge drains (errShuttingDown); gone reports
	// whether the client went away.
	ctx  context.Context
	gone func() bool
	// left is called when the client left before the end.
	left func()
	// read are frames taken from f before the response began.
	read []chunklog.Entry
}

// step writes one result of the follower: its frames, then [DONE], the
// event that tells the client to reconnect (the edge drains) or that the
// stream was interrupted, or a keepalive. It reports whether the response
// is over, and if so whether the client left before the end.
//
// The frames that became ready while it rendered go in the same batch:
// one write for all (a write and its deadline cost more than rendering a
// chunk), and none waits for more, as it takes only what the follower has
// at once (Follower.Ready), up to batchBytes.
func (st *sseStream) step(entries []chunklog.Entry, err error) (over, left bool) {
	// idle: the follower had nothing, a keepalive is due.
	var idle bool
	for {
		st.sess.delivered(entries)
		for _, e := range entries {
			st.d.frame(&st.out, e)
		}
		idle = len(entries) == 0
		follow.Release(entries)
		if err != nil || idle || st.f.Ended() || st.out.len() >= batchBytes || !st.f.Ready() {
			break
		}
		more, ok, perr := st.f.Poll(st.ctx)
		if !ok || len(more) == 0 && perr == nil {
			return st.flush(nil)
		}
		entries, err = more, perr
	}
	switch {
	case st.f.Ended():
		st.d.end(&st.out)
	case err != nil:
		if st.gone() {
			return true, true
		}
		if errors.Is(err, errShuttingDown) {
			st.out.retry(st.s.cfg.RetryHint)
			st.d.cut(&st.out, drainError(drainMessage))
			break
		}
		st.s.log.Warn("stream interrupted", "stream_id", st.id, "err", err)
		st.d.cut(&st.out, interruptedError())
	case idle:
		if p, ok := st.d.(pinger); ok {
			p.ping(&st.out)
		} else {
			st.out.keepalive()
		}
	}
	return st.flush(err)
}

// batchBytes bounds what step adds to a batch from frames that became
// ready while it rendered: beyond it, the batch is written and they wait
// for the next one.
const batchBytes = 32 << 10

// flush writes what step (or start) queued. After the end frame or an
// error event the response is over; a failed write means the client is
// gone, or too slow to take a batch within writeTimeout: either way it
// left, unless the edge is ending the response.
func (st *sseStream) flush(err error) (over, left bool) {
	if st.f.Ended() || err != nil {
		st.out.flushLast()
		return true, false
	}
	werr := st.out.flush()
	switch {
	case werr != nil:
		return true, !errors.Is(context.Cause(st.ctx), errShuttingDown)
	}
	return false, false
}

// begin writes the start of the response: the reconnection delay, what
// the dialect sends before the first frame, and the frames read before;
// it reports what step does.
func (st *sseStream) begin() (over, left bool) {
	st.out.start(st.s.cfg.RetryHint)
	st.d.begin(&st.out)
	if len(st.read) > 0 {
		return st.step(st.read, nil)
	}
	return st.flush(nil)
}

// finish ends the session once the follower and the client are released.
func (st *sseStream) finish(left bool) {
	st.sess.close()
	if left && st.left != nil {
		st.left()
	}
}

// interruptedError ends a response the edge could not finish because it
// lost the log. Its event has no id, so an EventSource reconnects after the
// last frame it got; an SDK raises it as an error rather than returning a
// cut answer. The cause is the caller's to log: the client is told what
// happened to its stream.
func interruptedError() *wire.Error {
	return &wire.Error{
		Message: "The edge lost the stream's log and could not finish this response; the answer is still being generated: resume the stream after the last event received.",
		Type:    wire.TypeServer,
		Code:    CodeInterrupted,
	}
}
