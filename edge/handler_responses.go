package edge

import (
	"encoding/json"
	"net/http"

	"github.com/relaydev/relay/relay/chunklog"
	"github.com/relaydev/relay/relay/dialect/chat"
	"github.com/relaydev/relay/relay/dialect/responses"
	"github.com/relaydev/relay/relay/wire"
)

// handleResponses serves POST /v1/responses: the request, its item
// references resolved (responses_refs.go) and the conversation of its
// previous_response_id prepended (responses_conversation.go), is kept as
// the response's conversation unless "store" is false, and translated into a chat
// completion (relay/dialect/responses) and queued like one, with an
// idempotency key too. The stream it starts is rendered as the
// Responses API's events ("stream": true), answered once its first frame
// is stored so that a provider's refusal is an HTTP error
// (follow_first_frame.go), or as one Response once it ended. With "background":
// true and no stream, it answers at once with the queued Response; the
// client reads it with GET /v1/responses/{id}. A background response is
// never cancelled because its client went away; any other follows the
// disconnect policy, as a chat completion does.
func (s *Server) handleResponses(w http.ResponseWriter, r *http.Request) {
	opts, ok := s.startOptionsOf(w, r)
	if !ok {
		return
	}
	body, e := readBody(w, r, s.cfg.MaxBodyBytes)
	lim := s.limits(opts.p)
	if e == nil {
		body, e = s.expandReferences(r.Context(), opts.p.tenant, body, lim.maxMessages, s.cfg.MaxBodyBytes)
	}
	var (
		input []json.RawMessage
		keep  bool
	)
	if e == nil {
		body, input, keep, e = s.continueConversation(r.Context(), opts.p.tenant, body, s.cfg.MaxBodyBytes)
	}
	var req responsesRequest
	if e == nil {
		req, e = parseResponsesRequest(body, lim)
	}
	if e != nil {
		writeError(w, e)
		return
	}
	b, ok := s.begin(w, r, opts, req.chat)
	if !ok {
		return
	}
	if keep && !b.replay {
		s.keepConversation(r.Context(), opts.p.tenant, b.id, input)
	}
	o, left := b.o, s.leaving(b, opts)
	if req.background {
		left = func() {}
	}
	switch {
	case req.stream:
		o, answered, gone := s.awaitFirstFrame(w, r, o, headHold{})
		switch {
		case gone:
			left()
		case !answered:
			markCached(w, o.read) // cached.go
			s.serveEvents(w, r, o, left, newResponseEvents(o.stream, -1))
		}
	case req.background:
		if b.f != nil {
			b.f.Close()
		}
		// A replay finds the response as far as it got.
		resp, e := s.snapshot(r.Context(), opts.p.tenant, b.id)
		if e != nil {
			writeError(w, e)
			return
		}
		writeJSON(w, http.StatusOK, resp)
	default:
		if s.serveResponse(w, r, o) {
			left()
		}
	}
}

// serveResponse answers a Responses request without "stream" once its
// stream ended: the Response, also when it ended incomplete or cancelled
// (a 200 an SDK does not retry, and the status says it is cut), or, when
// it failed, the end frame's error with its HTTP status. It reports
// whether the client left before the end.
func (s *Server) serveResponse(w http.ResponseWriter, r *http.Request, o origin) (left bool) {
	b := newResponseRenderer(o.stream, -1)
	end, left, ok := s.followToEnd(w, r, o, func(f wire.Frame) error {
		b.Chunk(nil, f)
		return nil
	})
	if !ok {
		return left
	}
	failure := chat.EndError(end.Frame)
	b.End(nil, end.Frame, failure)
	resp := b.Response()
	if resp.Status == responses.StatusFailed {
		writeError(w, failure)
		return false
	}
	markCached(w, []chunklog.Entry{end}) // cached.go
	writeJSON(w, http.StatusOK, resp)
	return false
}
