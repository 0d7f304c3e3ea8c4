package edge

import (
	"net/http"

	"github.com/relaydev/relay/relay/wire"
)

// handleResponses serves POST /v1/responses: the request, its item
// references resolved (responses_refs.go), is translated into a chat
// completion (responses_request.go) and queued like one, with
// an idempotency key too. The stream it starts is rendered as the
// Responses API's events ("stream": true), answered once its first frame
// is stored so that a provider's refusal is an HTTP error
// (first_frame.go), or as one Response once it ended. With "background":
// true and no stream, it answers at once with the queued Response; the
// client reads it with GET /v1/responses/{id}. A background response is
// never cancelled because its client went away; any other follows the
// disconnect policy, as a chat completion does.
func (s *Server) handleResponses(w http.ResponseWriter, r *http.Request) {
	opts, ok := s.startOptionsOf(w, r)
	if !ok {
		return
	}
	p, policy := opts.p, opts.policy
	body, e := readBody(w, r, s.cfg.MaxBodyBytes)
	if e == nil {
		body, e = s.expandReferences(r.Context(), p.tenant, body)
	}
	var req responsesRequest
	if e == nil {
		req, e = parseResponsesRequest(body, s.limits(p))
	}
	if e != nil {
		writeError(w, e)
		return
	}
	req.chat.FailFast = opts.failFast
	st, e := s.startFor(r.Context(), opts, req.chat)
	if e != nil {
		if e.Status >= 500 {
			s.log.Warn("submit failed", "err", e.Message)
		}
		writeError(w, e)
		return
	}
	w.Header().Set("X-Relay-Stream-Id", st.id)
	w.Header().Set(HeaderResumeToken, s.tokens.issue(st.id, p.tenant))
	if st.replay {
		w.Header().Set(HeaderIdempotentReplayed, "true")
	}
	o := origin{view: view{id: st.id, meta: st.meta}, f: st.f}
	left := func() {
		if !st.replay && !req.background {
			s.orphans.watch(p.tenant, st.id, policy)
		}
	}
	switch {
	case req.stream:
		o, answered, gone := s.awaitFirstFrame(w, r, o, headHold{})
		switch {
		case gone:
			left()
		case !answered:
			s.serveEvents(w, r, o, left, newResponseEvents(o.view, -1))
		}
	case req.background:
		if st.f != nil {
			st.f.close()
		}
		// A replay finds the response as far as it got.
		resp, e := s.snapshot(r.Context(), p.tenant, st.id)
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
	b := newResponseEvents(o.view, -1)
	end, left, ok := s.followToEnd(w, r, o, func(f wire.Frame) error {
		b.chunk(nil, f)
		return nil
	})
	if !ok {
		return left
	}
	b.finish(nil, end.Frame)
	resp := b.response()
	if resp.Status == responseFailed {
		writeError(w, endError(end.Frame))
		return false
	}
	writeJSON(w, http.StatusOK, resp)
	return false
}
