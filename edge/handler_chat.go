package edge

import (
	"net/http"
)

// handleChat serves POST /v1/chat/completions: it validates the request,
// queues it, and then serves the new stream like any resumed one, from the
// start. The X-Relay-Stream-Id header names the stream, so a client that
// loses the response resumes it with GET /v1/streams/{id}.
func (s *Server) handleChat(w http.ResponseWriter, r *http.Request) {
	req, e := readChatRequest(w, r, s.cfg.MaxBodyBytes, s.catalog.Serves)
	if e != nil {
		writeError(w, e)
		return
	}
	// Tenants come with authentication; until then every stream is "".
	id, meta, e := s.submit(r.Context(), "", req)
	if e != nil {
		s.log.Warn("submit failed", "err", e.Message)
		writeError(w, e)
		return
	}
	w.Header().Set("X-Relay-Stream-Id", id)
	o := origin{view: view{id: id, meta: meta}}
	if req.Stream {
		s.serveSSE(w, r, o)
		return
	}
	s.serveCompletion(w, r, o)
}
