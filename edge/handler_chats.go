package edge

import (
	"net/http"

	"github.com/relaydev/relay/edge/durable"
	"github.com/relaydev/relay/relay/dialect/chat"
	"github.com/relaydev/relay/relay/dialect/uimessage"
	"github.com/relaydev/relay/relay/wire"
)

// AI SDK chats: what useChat({ resume: true }) with the AI SDK's
// DefaultChatTransport and api "/v1/chats" asks, on the same durable
// streams as every other API:
//
//	POST /v1/chats                  useChat's messages (uimessage.ToChat) start the chat's
//	                                generation, served as the UI message stream
//	GET  /v1/chats/{id}/stream      the live generation from its start (a reloaded page
//	                                shows the whole answer once), else 204
//	POST /v1/chats/{id}/stop        cancel it (cancel.go); DELETE /v1/chats/{id}/stream too
//
// A chat has one live generation at a time (chats_pointer.go). A client
// that only disconnects (useChat's stop aborts its fetch) leaves it
// running, as the disconnect policy says, so that a reload resumes it.

// HeaderOnBusy says what a POST /v1/chats does while the chat's
// generation runs: "reject" (the default: 409 chat_busy, as the new
// message would otherwise get the old message's answer) or "attach" (be
// served the live generation, for a client that repeats its submit).
const HeaderOnBusy = "X-Relay-On-Busy"

// chatRoutes mounts the chat routes on mux.
func (s *Server) chatRoutes(mux *http.ServeMux) {
	mux.Handle("/v1/chats", methods{http.MethodPost: s.handleChats})
	mux.Handle("/v1/chats/{chatId}/stream", methods{http.MethodGet: s.handleChatStream, http.MethodDelete: s.handleChatStop})
	mux.Handle("/v1/chats/{chatId}/stop", methods{http.MethodPost: s.handleChatStop})
}

// handleChats serves POST /v1/chats: the request is translated and
// checked as a chat completion, started as the chat's generation (or
// attached to the live one, HeaderOnBusy), held until its first frame so
// that a provider's refusal is an HTTP error (useChat shows its message),
// and served as the UI message stream from the start. X-Relay-Stream-Id
// names the stream. The chat's id is what an Idempotency-Key would be
// (one generation at a time), so that header starts nothing here.
func (s *Server) handleChats(w http.ResponseWriter, r *http.Request) {
	opts, ok := s.startOptionsOf(w, r)
	if !ok {
		return
	}
	attach, e := onBusy(r)
	if e != nil {
		writeError(w, e)
		return
	}
	body, e := readBody(w, r, s.cfg.MaxBodyBytes)
	if e != nil {
		writeError(w, e)
		return
	}
	ui, e := uimessage.ToChat(body, s.cfg.ChatModel)
	if e != nil {
		writeError(w, e)
		return
	}
	req, e := parseChatRequest(ui.Body, s.limits(opts.p))
	if e != nil {
		writeError(w, e)
		return
	}
	req.FailFast, req.RequestID = opts.failFast, opts.requestID
	key, e := s.cursorKey(r.Context())
	if e != nil {
		writeError(w, e)
		return
	}
	st, e := s.startChat(r.Context(), opts.p.tenant, ui.ChatID, attach, req)
	if e != nil {
		if e.Code == CodeChatBusy {
			w.Header().Set("X-Relay-Stream-Id", st.id) // the live one
		}
		writeError(w, e)
		return
	}
	b := begun{started: st, token: s.tokens.issue(st.id, opts.p.tenant), o: origin{stream: chat.Stream{ID: st.id, Meta: st.meta, Cursors: key}, f: st.f}}
	s.nameChatStream(w, st.id, b.token)
	left := s.leaving(b, opts)
	o, answered, gone := s.awaitFirstFrame(w, r, b.o, chatHold)
	switch {
	case gone:
		left()
	case !answered:
		markCached(w, o.read) // cached.go
		s.serveUIMessages(w, r, o, left)
	}
}

// handleChatStream serves GET /v1/chats/{chatId}/stream: the chat's live
// generation as the UI message stream from its start, live until its
// end; 204 when none runs. The AI SDK's transport replaces the message it
// resumes with what it is served (resumeStreamIsReplay), so a page that
// showed part of the answer shows it once.
func (s *Server) handleChatStream(w http.ResponseWriter, r *http.Request) {
	snap, e := durable.WantsSnapshot(r)
	if e != nil {
		writeError(w, e)
		return
	}
	tenant := principalOf(r).tenant
	live, ok := s.liveChat(w, r, tenant)
	if !ok {
		return
	}
	o, e := s.open(r.Context(), tenant, live.id, "chatId", "", "")
	if e != nil {
		writeError(w, e)
		return
	}
	d, e := s.resumeDialect(r.Context(), o, newUIMessageEvents(o), snap)
	if e != nil {
		writeError(w, e)
		return
	}
	s.nameChatStream(w, live.id, s.tokens.issue(live.id, tenant))
	w.Header().Set(uimessage.Header, uimessage.HeaderVersion)
	s.serveEvents(w, r, o, nil, d)
}

// nameChatStream names a chat's generation in the response's headers:
// X-Relay-Stream-Id, its resume token, and as Location the generation as
// a Durable Stream of the same UI message chunks, which a Durable Streams
// chat transport reads instead of the body.
func (s *Server) nameChatStream(w http.ResponseWriter, id, token string) {
	hdr := w.Header()
	hdr.Set("X-Relay-Stream-Id", id)
	hdr.Set(HeaderResumeToken, token)
	hdr.Set("Location", s.cfg.DurableStreams.withDefaults().Prefix+"/generations/"+id+"?dialect=ui")
}

// handleChatStop serves POST /v1/chats/{chatId}/stop (and DELETE
// /v1/chats/{chatId}/stream): the chat's live generation is cancelled as
// DELETE /v1/streams/{id} cancels it, with the same answer; 204 when none
// runs.
func (s *Server) handleChatStop(w http.ResponseWriter, r *http.Request) {
	tenant := principalOf(r).tenant
	live, ok := s.liveChat(w, r, tenant)
	if !ok {
		return
	}
	status, e := s.cancelAndWait(r.Context(), tenant, live.id, "chatId")
	if e != nil {
		writeError(w, e)
		return
	}
	w.Header().Set("X-Relay-Stream-Id", live.id)
	writeJSON(w, cancelHTTPStatus(status), newCancelObject(live.id, status))
}

// liveChat is the live generation of the request's chat. When there is
// none (204) or it cannot tell, it answers itself and reports false.
func (s *Server) liveChat(w http.ResponseWriter, r *http.Request, tenant string) (liveChat, bool) {
	chatID := r.PathValue("chatId")
	if e := uimessage.CheckChatID(chatID, "chatId"); e != nil {
		writeError(w, e)
		return liveChat{}, false
	}
	live, e := s.liveChatOf(r.Context(), tenant, chatID)
	if e != nil {
		writeError(w, e)
		return liveChat{}, false
	}
	if live.id == "" {
		w.WriteHeader(http.StatusNoContent)
		return liveChat{}, false
	}
	return live, true
}

// onBusy reads HeaderOnBusy: whether to attach to a live generation.
func onBusy(r *http.Request) (attach bool, _ *wire.Error) {
	switch v := r.Header.Get(HeaderOnBusy); v {
	case "", "reject":
		return false, nil
	case "attach":
		return true, nil
	default:
		return false, invalid(HeaderOnBusy, CodeInvalidValue, "%s: %q is neither reject nor attach", HeaderOnBusy, v)
	}
}

// serveUIMessages serves o as the UI message stream (serveEvents).
func (s *Server) serveUIMessages(w http.ResponseWriter, r *http.Request, o origin, left func()) {
	w.Header().Set(uimessage.Header, uimessage.HeaderVersion)
	s.serveEvents(w, r, o, left, newUIMessageEvents(o))
}

// newUIMessageEvents renders o's stream as its UI message from the start.
func newUIMessageEvents(o origin) uiMessageEvents {
	return uiMessageEvents{uimessage.NewEncoder(uimessage.MessageID(o.stream.ID))}
}
