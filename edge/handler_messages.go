package edge

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/relaydev/relay/edge/durable"
	"github.com/relaydev/relay/relay/chunklog"
	"github.com/relaydev/relay/relay/dialect/anthropic"
	"github.com/relaydev/relay/relay/dialect/chat"
	"github.com/relaydev/relay/relay/wire"
)

// CodeMessageNotFound answers a Message id that is unknown, expired, or
// another tenant's.
const CodeMessageNotFound = "message_not_found"

// messagesHold is how a streamed Messages response holds its head
// (follow_first_frame.go): any failed end within headHoldMax is the response's
// HTTP status, as Anthropic answers an overloaded or refused request;
// past it the head goes, with pings.
var messagesHold = headHold{untilKeepalive: true}

// handleMessages serves POST /v1/messages, Anthropic's Messages API: the
// request is translated into a chat completion (messages_request.go) and
// queued like one, with an idempotency key or an SDK's retry count too
// (start_sdk_retry.go: Anthropic's SDKs send X-Stainless-Retry-Count). The
// stream it starts is rendered as Anthropic's events ("stream": true;
// messages_events.go), each with an id that GET /v1/messages/{id} resumes
// after, or as one Message once it ended (serveMessage). X-Relay-Stream-Id
// names the stream, and the Message id is "msg_" + stream id.
func (s *Server) handleMessages(w http.ResponseWriter, r *http.Request) {
	opts, ok := s.startOptionsOf(w, r)
	if !ok {
		return
	}
	req, e := readMessagesRequest(w, r, s.cfg.MaxBodyBytes, s.limits(opts.p))
	if e != nil {
		writeError(w, e)
		return
	}
	b, ok := s.begin(w, r, opts, req.chat)
	if !ok {
		return
	}
	o, left := b.o, s.leaving(b, opts)
	if !req.stream {
		if s.serveMessage(w, r, o) {
			left()
		}
		return
	}
	o, answered, gone := s.awaitFirstFrame(w, r, o, messagesHold)
	switch {
	case gone:
		left()
	case !answered:
		markCached(w, o.read) // cached.go
		s.serveEvents(w, r, o, left, newMessageEvents(o.stream, -1))
	}
}

// serveMessage answers a Messages request without "stream" once its
// stream ended: the Message; when the stream failed, its error with its
// status. A stream that ended incomplete or cancelled is a 200 too, with
// the text so far, stop_reason null and the error that cut it: as a 5xx
// an SDK would retry it, paying for the answer again. It reports whether
// the client left before the end.
func (s *Server) serveMessage(w http.ResponseWriter, r *http.Request, o origin) (left bool) {
	m := newMessageEvents(o.stream, -1)
	end, left, ok := s.followToEnd(w, r, o, func(f wire.Frame) error {
		m.Chunk(nil, f)
		return nil
	})
	if !ok {
		return left
	}
	if end.Frame.Status == wire.StatusFailed {
		writeError(w, chat.EndError(end.Frame))
		return false
	}
	m.End(nil, end.Frame, chat.EndError(end.Frame))
	markCached(w, []chunklog.Entry{end}) // cached.go
	writeJSON(w, http.StatusOK, m.Message())
	return false
}

// handleMessage serves GET /v1/messages/{id}: the Message as far as its
// stream got or, for a client that asks for events (Accept:
// text/event-stream, ?stream=true, or a Last-Event-ID), its events after
// the Last-Event-ID header (or ?last_event_id), live until the end. Any
// edge serves it; only the stream's tenant may read it (or a resume
// token's holder). ?snapshot=true asks for the events too, with the
// deltas stored so far folded, one per block (follow_snapshot.go).
func (s *Server) handleMessage(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	sid, ok := anthropic.StreamOfMessage(id)
	if !ok {
		writeError(w, messageNotFound(id))
		return
	}
	tenant := principalOf(r).tenant
	cursor, param := requestCursor(r)
	snap, e := durable.WantsSnapshot(r)
	if e != nil {
		writeError(w, e)
		return
	}
	if !snap && !wantsEvents(r, cursor) {
		msg, e := s.messageSnapshot(r.Context(), tenant, sid)
		if e != nil {
			writeError(w, e)
			return
		}
		writeJSON(w, http.StatusOK, msg)
		return
	}
	after, e := lastEventNumber(cursor, param)
	if e != nil {
		writeError(w, e)
		return
	}
	// The events are rendered from the stream's first frame, whatever
	// the client has (anthropic.Events).
	o, e := s.open(r.Context(), tenant, sid, "message_id", "", param)
	s.obs.resume(cursor, e)
	if e != nil {
		if e.Code == CodeStreamNotFound {
			e = messageNotFound(id)
		}
		writeError(w, e)
		return
	}
	d, e := s.resumeDialect(r.Context(), o, newMessageEvents(o.stream, after), snap)
	if e != nil {
		writeError(w, e)
		return
	}
	s.serveEvents(w, r, o, nil, d)
}

// wantsEvents reports whether a GET of a Message asks for its events.
func wantsEvents(r *http.Request, cursor string) bool {
	if cursor != "" || strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
		return true
	}
	stream, _ := strconv.ParseBool(r.URL.Query().Get("stream"))
	return stream
}

// lastEventNumber parses the id of the last event a client has; -1 when
// it has none.
func lastEventNumber(v, param string) (int, *wire.Error) {
	if v == "" {
		return -1, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, invalid(param, CodeInvalidCursor, "%s: must be the id of an event of the stream (an integer >= 0)", param)
	}
	return n, nil
}

// messageSnapshot is the Message of stream sid as far as it is stored.
func (s *Server) messageSnapshot(ctx context.Context, tenant, sid string) (anthropic.Message, *wire.Error) {
	ctx, cancel := context.WithTimeout(ctx, natsTimeout)
	defer cancel()
	meta, _, err := s.meta.get(ctx, sid)
	switch {
	case errors.Is(err, errNoMeta), err == nil && meta.Tenant != tenant:
		return anthropic.Message{}, messageNotFound(anthropic.MessageID(sid))
	case err != nil:
		return anthropic.Message{}, unavailable("reading stream metadata", err)
	}
	m := newMessageEvents(chat.Stream{ID: sid, Meta: meta}, -1)
	if _, err := s.reader.Read(ctx, sid, 0, func(e chunklog.Entry) error {
		m.add(nil, e.Frame)
		return nil
	}); err != nil {
		return anthropic.Message{}, unavailable("reading the stream", err)
	}
	return m.Message(), nil
}

// messageNotFound is the 404 of an unknown Message id; another tenant's
// gets it too, so that its existence is not revealed.
func messageNotFound(id string) *wire.Error {
	return &wire.Error{
		Message: "message " + id + " does not exist or has expired",
		Type:    wire.TypeNotFound,
		Param:   "message_id",
		Code:    CodeMessageNotFound,
		Status:  http.StatusNotFound,
	}
}
