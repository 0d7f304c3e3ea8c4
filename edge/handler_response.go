package edge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"

	"github.com/relaydev/relay/edge/durable"
	"github.com/relaydev/relay/relay/chunklog"
	"github.com/relaydev/relay/relay/dialect/chat"
	"github.com/relaydev/relay/relay/dialect/responses"
	"github.com/relaydev/relay/relay/wire"
)

// CodeResponseNotFound answers a Response id that is unknown, expired, or
// another tenant's.
const CodeResponseNotFound = "response_not_found"

// handleResponse serves GET /v1/responses/{id}: the Response as far as
// its stream got, or with ?stream=true its events, from the start or
// after ?starting_after=N, live until the end. The id names the stream
// ("resp_" + stream id), so any edge serves it; only the stream's tenant
// may read it. With ?snapshot=true the deltas stored so far come folded,
// one per part (follow_snapshot.go).
func (s *Server) handleResponse(w http.ResponseWriter, r *http.Request) {
	id, sid, tenant, ok := responseOf(w, r)
	if !ok {
		return
	}
	stream, e := retrieveStreams(w, r)
	if e != nil {
		writeError(w, e)
		return
	}
	if !stream {
		resp, e := s.snapshot(r.Context(), tenant, sid)
		if e != nil {
			writeError(w, e)
			return
		}
		writeJSON(w, http.StatusOK, resp)
		return
	}
	q := r.URL.Query()
	after, e := startingAfter(q.Get("starting_after"))
	var snap bool
	if e == nil {
		snap, e = durable.WantsSnapshot(r)
	}
	if e != nil {
		writeError(w, e)
		return
	}
	// The events are rendered from the stream's first frame, whatever
	// the client has (relay/dialect/responses).
	o, e := s.open(r.Context(), tenant, sid, "response_id", "", "starting_after")
	s.obs.resume(q.Get("starting_after"), e)
	if e != nil {
		writeError(w, asResponseError(e, id))
		return
	}
	d, e := s.resumeDialect(r.Context(), o, newResponseEvents(o.stream, after), snap)
	if e != nil {
		writeError(w, e)
		return
	}
	s.serveEvents(w, r, o, nil, d)
}

// handleResponseCancel serves POST /v1/responses/{id}/cancel, the way
// DELETE /v1/streams/{id} cancels (cancel.go): the Response once its
// stream ended (cancelled, or however it had ended before), or 202 with
// the Response as it is when the end did not appear within cancelWait.
func (s *Server) handleResponseCancel(w http.ResponseWriter, r *http.Request) {
	id, sid, tenant, ok := responseOf(w, r)
	if !ok {
		return
	}
	status, e := s.cancelAndWait(r.Context(), tenant, sid, "response_id")
	if e != nil {
		writeError(w, asResponseError(e, id))
		return
	}
	resp, e := s.snapshot(r.Context(), tenant, sid)
	if e != nil {
		writeError(w, e)
		return
	}
	writeJSON(w, cancelHTTPStatus(status), resp)
}

// responseOf is the Response id of the request's path, its stream and the
// caller's tenant; !ok when the id is not one the relay gives out (then it
// answered 404).
func responseOf(w http.ResponseWriter, r *http.Request) (id, sid, tenant string, ok bool) {
	id = r.PathValue("id")
	if sid, ok = responses.StreamOfResponse(id); !ok {
		writeError(w, responseNotFound(id))
	}
	return id, sid, principalOf(r).tenant, ok
}

// snapshot is the Response of stream sid as far as it is stored.
func (s *Server) snapshot(ctx context.Context, tenant, sid string) (responses.Response, *wire.Error) {
	ctx, cancel := context.WithTimeout(ctx, natsTimeout)
	defer cancel()
	meta, _, err := s.meta.get(ctx, sid)
	switch {
	case errors.Is(err, errNoMeta), err == nil && meta.Tenant != tenant:
		return responses.Response{}, responseNotFound(responses.ResponseID(sid))
	case err != nil:
		return responses.Response{}, unavailable("reading stream metadata", err)
	}
	b := newResponseRenderer(chat.Stream{ID: sid, Meta: meta}, -1)
	if _, err := s.reader.Read(ctx, sid, 0, func(e chunklog.Entry) error {
		renderResponseFrame(b, nil, e.Frame)
		return nil
	}); err != nil {
		return responses.Response{}, unavailable("reading the stream", err)
	}
	return b.Response(), nil
}

// maxRetrieveBody bounds the body of a retrieve: {"stream": true} at most.
const maxRetrieveBody = 4 << 10

// retrieveStreams reports whether a retrieve asks for the events:
// ?stream=true, or "stream": true in a JSON body, where openai-go's
// GetStreaming puts it (on a GET).
func retrieveStreams(w http.ResponseWriter, r *http.Request) (bool, *wire.Error) {
	if v := r.URL.Query().Get("stream"); v != "" {
		stream, err := strconv.ParseBool(v)
		if err != nil {
			return false, invalid("stream", CodeInvalidValue, "'stream' must be true or false")
		}
		return stream, nil
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRetrieveBody))
	if err != nil {
		return false, invalid("", CodeInvalidJSON, "reading request body: %v", err)
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return false, nil
	}
	var b struct {
		Stream bool `json:"stream"`
	}
	if json.Unmarshal(body, &b) != nil {
		return false, invalid("", CodeInvalidJSON, "the body of a retrieve, if any, must be a JSON object")
	}
	return b.Stream, nil
}

// startingAfter parses the starting_after parameter: the sequence number
// of the last event the client has; -1 when absent (from the start).
func startingAfter(v string) (int, *wire.Error) {
	if v == "" {
		return -1, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, invalid("starting_after", CodeInvalidValue, "'starting_after' must be a sequence number (an integer >= 0)")
	}
	return n, nil
}

// responseNotFound is the 404 of an unknown Response id; another tenant's
// gets it too, so that its existence is not revealed.
func responseNotFound(id string) *wire.Error {
	return &wire.Error{
		Message: "response " + id + " does not exist or has expired",
		Type:    wire.TypeNotFound,
		Param:   "response_id",
		Code:    CodeResponseNotFound,
		Status:  http.StatusNotFound,
	}
}

// asResponseError names a stream that was not found as the Response id
// the client asked for.
func asResponseError(e *wire.Error, id string) *wire.Error {
	if e.Code == CodeStreamNotFound {
		return responseNotFound(id)
	}
	return e
}
