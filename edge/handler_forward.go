package edge

import (
	"encoding/json"
	"net/http"

	"github.com/relaydev/relay/relay/dialect/chat"
	"github.com/relaydev/relay/relay/spend"
	"github.com/relaydev/relay/relay/wire"
)

// handleEmbeddings serves POST /v1/embeddings and handleCompletions POST
// /v1/completions (the legacy text completions): the edge checks the
// caller as it does for a chat completion (key, model, tenant limit, fail
// fast) and forwards the request to a worker, which calls the providers
// with the generations' routing, keys, breakers and retries
// (forward_exchange.go). Neither is a durable stream: nothing is stored,
// there is no stream id to resume, and an answer cut mid-stream ends with
// an error event.
func (s *Server) handleEmbeddings(w http.ResponseWriter, r *http.Request) {
	s.handleForward(w, r, wire.EndpointEmbeddings)
}

// handleCompletions: see handleEmbeddings.
func (s *Server) handleCompletions(w http.ResponseWriter, r *http.Request) {
	s.handleForward(w, r, wire.EndpointCompletions)
}

func (s *Server) handleForward(w http.ResponseWriter, r *http.Request, endpoint wire.ForwardEndpoint) {
	opts, ok := s.startOptionsOf(w, r)
	if !ok {
		return
	}
	body, e := readBody(w, r, s.cfg.MaxBodyBytes)
	if e != nil {
		writeError(w, e)
		return
	}
	req, e := parseForwardRequest(body, endpoint, s.limits(opts.p))
	if e != nil {
		writeError(w, e)
		return
	}
	req.ID, req.Tenant, req.FailFast = wire.NewStreamID(), opts.p.tenant, opts.failFast
	req.Key = principalIn(r.Context()).key
	hold, e := s.forwardCost(opts.p.tenant, req) // admit_spend_hold.go
	if e != nil {
		writeError(w, e)
		return
	}
	if e := s.admitGeneration(r.Context(), opts.p.tenant, chatRequest{Model: req.Model, FailFast: req.FailFast}); e != nil { // admit_cluster.go
		writeError(w, e)
		return
	}
	release, e := s.reserveSpend(r.Context(), opts.p.tenant, req.ID, func() spend.Hold { return hold })
	if e != nil {
		writeError(w, e)
		return
	}
	sw := &statusWriter{ResponseWriter: w}
	s.forward(sw, r, req)
	if sw.status != http.StatusOK {
		release() // no answer: nothing was spent, and nothing is recorded
	}
}

// statusWriter notes the status of a forwarded request's response: one
// that was not answered releases its spend hold.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the connection.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// inputField is the field that holds what a forwarded endpoint works on.
var inputField = map[wire.ForwardEndpoint]string{
	wire.EndpointEmbeddings:  "input",
	wire.EndpointCompletions: "prompt",
}

// parseForwardRequest checks what the relay relies on (the model, served
// and allowed; stream a boolean, and only for completions), what it caps
// (max_tokens), and text that is not UTF-8 (chat.CheckText: the body goes
// to the provider as it came); the provider checks the rest, and its 400
// reaches the client as it sent it.
func parseForwardRequest(body []byte, endpoint wire.ForwardEndpoint, lim limits) (wire.ForwardRequest, *wire.Error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil || fields == nil {
		return wire.ForwardRequest{}, invalid("", CodeInvalidJSON, "request body must be a JSON object")
	}
	req := wire.ForwardRequest{Endpoint: endpoint, Body: body}
	if json.Unmarshal(fields["model"], &req.Model) != nil || req.Model == "" {
		return req, invalid("model", CodeInvalidValue, "'model' must be a non-empty string")
	}
	if !lim.served(req.Model) || lim.allowed != nil && !lim.allowed(req.Model) {
		return req, modelNotFound(req.Model)
	}
	if e := chat.CheckText(body, chat.Indexed); e != nil {
		return req, e
	}
	if field := inputField[endpoint]; fields[field] == nil || isNull(fields[field]) {
		return req, invalid(field, CodeInvalidValue, "missing required parameter: '%s'", field)
	}
	if raw, ok := fields["stream"]; ok && !isNull(raw) {
		if json.Unmarshal(raw, &req.Stream) != nil {
			return req, invalid("stream", CodeInvalidValue, "'stream' must be a boolean")
		}
		if req.Stream && endpoint == wire.EndpointEmbeddings {
			return req, invalid("stream", CodeInvalidValue, "embeddings are not streamed")
		}
	}
	if e := chat.CheckMaxTokens(fields, "max_tokens", lim.maxTokens); e != nil {
		return req, e
	}
	return req, nil
}

// isNull reports whether a member of a forwarded request is null.
func isNull(raw json.RawMessage) bool { return string(raw) == "null" }
