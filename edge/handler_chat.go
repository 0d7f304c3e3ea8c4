package edge

import (
	"net/http"

	"github.com/relaydev/relay/relay/dialect/chat"
	"github.com/relaydev/relay/relay/wire"
)

// handleChat serves POST /v1/chat/completions: it validates the request,
// queues it (or, with an idempotency key, attaches to the stream the key
// started: start_idempotency.go), and then serves the stream like any resumed
// one, from the start, once its first frame is stored, so that a provider's
// refusal is an HTTP error (follow_first_frame.go). The X-Relay-Stream-Id header
// names the stream, so a client that loses the response resumes it with
// GET /v1/streams/{id};
// X-Relay-Resume-Token lets it do so without its key (start_resume_token.go).
// If the client that started the generation goes away before the end, the
// disconnect policy (Config.OnClientDisconnect, or the request's
// X-Relay-On-Disconnect header) decides the generation's fate.
func (s *Server) handleChat(w http.ResponseWriter, r *http.Request) {
	opts, ok := s.startOptionsOf(w, r)
	if !ok {
		return
	}
	req, e := readChatRequest(w, r, s.cfg.MaxBodyBytes, s.limits(opts.p))
	if e != nil {
		writeError(w, e)
		return
	}
	b, ok := s.begin(w, r, opts, req)
	if !ok {
		return
	}
	o, left := b.o, s.leaving(b, opts)
	if !req.Stream {
		if s.serveCompletion(w, r, o) {
			left()
		}
		return
	}
	o.stream.ResumeToken = b.token
	o, answered, gone := s.awaitFirstFrame(w, r, o, chatHold)
	switch {
	case gone:
		left()
	case !answered:
		markCached(w, o.read) // cached.go
		s.serveSSE(w, r, o, left)
	}
}

// begun is a generation a POST started, or found again (a replay): the
// stream its handler serves.
type begun struct {
	started
	// token is the stream's resume token; o serves the stream.
	token string
	o     origin
}

// begin starts the generation of req for the client of opts (startFor)
// and names its stream in the response's headers: X-Relay-Stream-Id,
// Location (where to resume it), the resume token, and
// Idempotent-Replayed for a replay. On failure it
// answers the error itself and reports false.
func (s *Server) begin(w http.ResponseWriter, r *http.Request, opts startOptions, req chatRequest) (begun, bool) {
	req.FailFast, req.RequestID = opts.failFast, opts.requestID
	key, e := s.cursorKey(r.Context())
	if e != nil {
		writeError(w, e)
		return begun{}, false
	}
	st, e := s.startFor(r.Context(), opts, req)
	if e != nil {
		if e.Status >= 500 {
			s.log.Warn("submit failed", "err", e.Message)
		}
		writeError(w, e)
		return begun{}, false
	}
	b := begun{started: st, token: s.tokens.issue(st.id, opts.p.tenant)}
	w.Header().Set("X-Relay-Stream-Id", st.id)
	w.Header().Set("Location", streamLocation(st.id))
	w.Header().Set(HeaderResumeToken, b.token)
	if st.replay {
		w.Header().Set(HeaderIdempotentReplayed, "true")
	}
	b.o = origin{stream: chat.Stream{ID: st.id, Meta: st.meta, Cursors: key}, f: st.f}
	return b, true
}

// streamLocation is where a client resumes stream id: the Location of
// the response that started it, relative as the other resume headers are.
func streamLocation(id string) string { return "/v1/streams/" + id }

// leaving is what becomes of b's generation when its client leaves before
// the end: the disconnect policy of opts. A replay did not start the
// generation: the first request's policy applies to it.
func (s *Server) leaving(b begun, opts startOptions) func() {
	return func() {
		if !b.replay {
			s.orphans.watch(opts.p.tenant, b.id, opts.policy)
		}
	}
}

// startOptions are what a request that starts a generation says besides
// its body, in any dialect: who asks, what becomes of the generation if
// its client leaves, its idempotency key, whether it fails fast, and which
// attempt of an SDK it is (start_sdk_retry.go; -1: none).
type startOptions struct {
	p          principal
	policy     DisconnectPolicy
	key        string
	failFast   bool
	sdkAttempt int
	// requestID is the client's X-Request-Id, which the provider's calls
	// carry (provider request_headers); empty if it sent none, or one
	// that is not a valid key (then an Idempotency-Key was the key).
	requestID string
}

// startOptionsOf reads the start options of r. On a draining edge, or
// when a header is invalid, it answers the error itself and reports false.
func (s *Server) startOptionsOf(w http.ResponseWriter, r *http.Request) (startOptions, bool) {
	if s.clients.draining() {
		writeDraining(w, s.cfg.RetryHint, drainMessage)
		return startOptions{}, false
	}
	o := startOptions{p: principalOf(r), sdkAttempt: sdkAttempt(r)}
	if id := r.Header.Get(HeaderRequestID); checkIdempotencyKey(id, HeaderRequestID) == nil {
		o.requestID = id
	}
	var e *wire.Error
	if o.policy, e = s.disconnectPolicy(r); e == nil {
		if o.key, e = idempotencyKeyOf(r); e == nil {
			o.failFast, e = failFast(r, o.p)
		}
	}
	if e != nil {
		writeError(w, e)
		return startOptions{}, false
	}
	return o, true
}

// disconnectPolicy is the request's X-Relay-On-Disconnect, or the
// configured policy when it has none.
func (s *Server) disconnectPolicy(r *http.Request) (DisconnectPolicy, *wire.Error) {
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
