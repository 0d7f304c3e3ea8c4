package edge

import (
	"net/http"

	"github.com/relaydev/relay/relay/protocol"
)

// handleChat serves POST /v1/chat/completions: it validates the request,
// queues it, and then serves the new stream like any resumed one, from the
// start. The X-Relay-Stream-Id header names the stream, so a client that
// loses the response resumes it with GET /v1/streams/{id}. If the client
// goes away before the end, the disconnect policy (Config.OnClientDisconnect,
// or the request's X-Relay-On-Disconnect header) decides the generation's
// fate.
func (s *Server) handleChat(w http.ResponseWriter, r *http.Request) {
	if s.clients.draining() {
		writeDraining(w, s.cfg.RetryHint, drainMessage)
		return
	}
	policy, e := s.disconnectPolicy(r)
	if e != nil {
		writeError(w, e)
		return
	}
	req, e := readChatRequest(w, r, s.cfg.MaxBodyBytes, s.catalog.Serves)
	if e != nil {
		writeError(w, e)
		return
	}
	// Tenants come with authentication; until then every stream is "".
	const tenant = ""
	id, meta, e := s.submit(r.Context(), tenant, req)
	if e != nil {
		s.log.Warn("submit failed", "err", e.Message)
		writeError(w, e)
		return
	}
	w.Header().Set("X-Relay-Stream-Id", id)
	o := origin{view: view{id: id, meta: meta}}
	var left bool
	if req.Stream {
		left = s.serveSSE(w, r, o)
	} else {
		left = s.serveCompletion(w, r, o)
	}
	if left {
		s.orphans.watch(tenant, id, policy)
	}
}

// disconnectPolicy is the request's X-Relay-On-Disconnect, or the
// configured policy when it has none.
func (s *Server) disconnectPolicy(r *http.Request) (DisconnectPolicy, *protocol.Error) {
	h := r.Header.Get(HeaderOnDisconnect)
	if h == "" {
		return s.cfg.OnClientDisconnect, nil
	}
	p, err := parseDisconnectPolicy(h)
	if err != nil {
		return DisconnectPolicy{}, invalid(HeaderOnDisconnect, CodeInvalidValue, "%s: %v", HeaderOnDisconnect, err)
	}
	return p, nil
}
