package edge

import (
	"context"
	"errors"
	"net/http"

	"github.com/relaydev/relay/relay/wire"
)

// # Demo chat (edge.demo, on in `relay dev`)
//
//	GET  /                        the chat page (web/demo.html): it streams an answer with EventSource
//	POST /v1/streams              start a generation and answer at once, without following it:
//	                              202 {"id", "object": "relay.stream", "url", "resume_token"}
//	POST /v1/streams/{id}/drop    end every GET /v1/streams/{id} response on this edge as a cut
//	                              connection would: 200 {"id", "dropped": n}
//
// An EventSource cannot POST, so the page starts the answer with POST
// /v1/streams (same body, authentication and limits as POST
// /v1/chat/completions; "stream" is ignored) and follows it with
// new EventSource("/v1/streams/<id>?token=<resume_token>"). Its "drop
// connection" button calls the drop endpoint: the edge ends the response
// (a clean end of the body, no error event), and the browser's own
// EventSource reconnects after the retry hint with Last-Event-ID, which
// the edge resumes after. Both POST endpoints exist only with edge.demo.
//
// Both act for the caller's tenant only: POST /v1/streams holds nothing
// once it has answered (the page follows the stream with a GET of its own,
// so the follower that started it is released at once), and a drop of
// another tenant's stream is a 404, as a GET or DELETE of it is.

// demoRoutes registers the demo's page and endpoints.
func (s *Server) demoRoutes(mux *http.ServeMux) {
	mux.Handle("/{$}", methods{http.MethodGet: servePage("demo.html")})
	mux.Handle("/v1/streams", methods{http.MethodPost: s.handleDetach})
	mux.Handle("/v1/streams/{id}/drop", methods{http.MethodPost: s.handleDrop})
}

// detached is the answer to POST /v1/streams.
type detached struct {
	ID          string `json:"id"`
	Object      string `json:"object"`
	URL         string `json:"url"`
	ResumeToken string `json:"resume_token"`
}

// handleDetach serves POST /v1/streams: it starts a generation like POST
// /v1/chat/completions and answers with the stream's id at once.
func (s *Server) handleDetach(w http.ResponseWriter, r *http.Request) {
	if s.clients.draining() {
		writeDraining(w, s.cfg.RetryHint, drainMessage)
		return
	}
	p := principalOf(r)
	req, e := readChatRequest(w, r, s.cfg.MaxBodyBytes, s.limits(p))
	if e != nil {
		writeError(w, e)
		return
	}
	st, e := s.start(r.Context(), p.tenant, "", req)
	if e != nil {
		writeError(w, e)
		return
	}
	// Nobody reads this follower (a start without an idempotency key
	// always has one): kept, it would hold the stream's two subscriptions,
	// and count as a follower, for good.
	st.f.Close()
	token := s.tokens.issue(st.id, p.tenant)
	w.Header().Set("X-Relay-Stream-Id", st.id)
	w.Header().Set(HeaderResumeToken, token)
	writeJSON(w, http.StatusAccepted, detached{ID: st.id, Object: "relay.stream", URL: "/v1/streams/" + st.id, ResumeToken: token})
}

// handleDrop serves POST /v1/streams/{id}/drop.
func (s *Server) handleDrop(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if !wire.ValidStreamID(id) {
		writeError(w, invalid("id", CodeInvalidStreamID, "%q is not a stream id", id))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), natsTimeout)
	defer cancel()
	meta, _, err := s.meta.get(ctx, id)
	switch {
	case errors.Is(err, errNoMeta), err == nil && meta.Tenant != principalOf(r).tenant:
		writeError(w, notFound(id, "id"))
		return
	case err != nil:
		writeError(w, unavailable("reading stream metadata", err))
		return
	}
	n := s.obs.drops.drop(id)
	writeJSON(w, http.StatusOK, struct {
		ID      string `json:"id"`
		Dropped int    `json:"dropped"`
	}{id, n})
}
