package durable

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	store "github.com/relaydev/relay/relay/durable"
	"github.com/relaydev/relay/relay/wire"
)

// Config of the protocol: the edge's edge.durable_streams settings.
type Config struct {
	// Prefix is the path the streams are served under ("/ds").
	Prefix string
	// LongPollTimeout is how long a long-poll waits for data before its 204.
	LongPollTimeout time.Duration
	// SSEDuration is how long an SSE response lasts before the server ends
	// it (the client reconnects from its last offset).
	SSEDuration time.Duration
	// MaxAppendBytes bounds a PUT's or POST's body (413 past it).
	MaxAppendBytes int64
	// Keepalive is how often an idle SSE response gets a comment.
	Keepalive time.Duration
}

// Access is who a request acts for: a tenant, or, with a resume token,
// whoever holds the token of the one stream it names.
type Access struct {
	// Tenant is the key's tenant, or the one a token says it was issued
	// to (which Verify confirms).
	Tenant string
	// Token is the resume token of a read that carries one, and Verify
	// returns the tenant it was issued to if it is valid for stream id.
	Token  string
	Verify func(token, id string) (tenant string, ok bool)
}

// Deps are the handler's collaborators in the edge.
type Deps struct {
	Store *store.Store
	// NC receives the stored frames a live read waits for
	// (wire.LiveSubject).
	NC *nats.Conn
	// Offsets is the key offsets are sealed with (the cluster's cursor key).
	Offsets func(context.Context) (*wire.CursorKey, error)
	// Authorize decides who a request acts for, or refuses it (it may set
	// the refusal's headers on w).
	Authorize func(http.ResponseWriter, *http.Request) (Access, *wire.Error)
	// IssueToken returns a resume token for the tenant's stream id.
	IssueToken func(id, tenant string) string
	// WriteError answers with an error in the edge's shape.
	WriteError func(http.ResponseWriter, *wire.Error)
	// Generations reads the relay's generations (GET {prefix}/generations/{id}).
	Generations Generations
	// Dialects are the dialects a generation may be read in, by the name
	// ?dialect= gives, besides "chat" (ChatDialect).
	Dialects map[string]Dialect
	Logger   *slog.Logger
	// Drain is closed when the edge starts draining: a waiting long-poll
	// answers at once as its timeout would, and an SSE response ends
	// with a control event at the offset it reached, from which the
	// client reconnects to another edge. Nil: never.
	Drain <-chan struct{}
}

// Handler serves the Durable Streams protocol under Config.Prefix.
type Handler struct {
	cfg      Config
	deps     Deps
	dialects map[string]Dialect
	now      func() time.Time
}

// New returns the handler.
func New(cfg Config, deps Deps) *Handler {
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.DiscardHandler)
	}
	dialects := map[string]Dialect{defaultDialect: ChatDialect}
	for name, d := range deps.Dialects {
		dialects[name] = d
	}
	return &Handler{cfg: cfg, deps: deps, dialects: dialects, now: time.Now}
}

// The protocol's headers.
const (
	hNextOffset    = "Stream-Next-Offset"
	hUpToDate      = "Stream-Up-To-Date"
	hClosed        = "Stream-Closed"
	hCursor        = "Stream-Cursor"
	hTTL           = "Stream-TTL"
	hExpiresAt     = "Stream-Expires-At"
	hSeq           = "Stream-Seq"
	hForkedFrom    = "Stream-Forked-From"
	hForkOffset    = "Stream-Fork-Offset"
	hForkSubOffset = "Stream-Fork-Sub-Offset"
	hSSEEncoding   = "Stream-SSE-Data-Encoding"
	hProducerID    = "Producer-Id"
	hProducerEpoch = "Producer-Epoch"
	hProducerSeq   = "Producer-Seq"
	hExpectedSeq   = "Producer-Expected-Seq"
	hReceivedSeq   = "Producer-Received-Seq"

	// HeaderStreamID names the relay stream behind a Durable Stream, which
	// GET /v1/streams/{id} and /v1/ws also serve.
	HeaderStreamID = "X-Relay-Stream-Id"
	// HeaderResumeToken carries the stream's resume token.
	HeaderResumeToken = "X-Relay-Resume-Token"
)

// ExposedHeaders are the protocol's response headers a browser page on
// an allowed origin must be able to read (edge/admit_cors.go, whose own
// list has Location).
var ExposedHeaders = []string{hNextOffset, hUpToDate, hClosed, hCursor, hTTL, hExpiresAt, hSSEEncoding,
	hProducerEpoch, hProducerSeq, hExpectedSeq, hReceivedSeq, "ETag"}

// generationsPath is the part of the prefix's space the relay's
// generations are read under.
const generationsPath = "/generations/"

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hdr := w.Header()
	hdr.Set("X-Content-Type-Options", "nosniff")
	hdr.Set("Cross-Origin-Resource-Policy", "cross-origin")
	path, ok := strings.CutPrefix(r.URL.EscapedPath(), h.cfg.Prefix)
	if !ok || len(path) < 2 || path[0] != '/' {
		h.fail(w, &wire.Error{Message: "a stream's path follows " + h.cfg.Prefix + "/", Type: wire.TypeInvalidRequest, Code: "unknown_url", Status: http.StatusNotFound})
		return
	}
	acc, e := h.deps.Authorize(w, r)
	if e != nil {
		h.fail(w, e)
		return
	}
	if id, ok := strings.CutPrefix(path, generationsPath); ok {
		h.serveGeneration(w, r, acc, id)
		return
	}
	if acc.Token != "" && r.Method != http.MethodGet && r.Method != http.MethodHead {
		h.fail(w, &wire.Error{Message: "a resume token only reads its stream", Type: wire.TypeInvalidRequest, Param: "token", Code: "invalid_resume_token", Status: http.StatusForbidden})
		return
	}
	switch r.Method {
	case http.MethodPut:
		h.create(w, r, acc, path)
	case http.MethodPost:
		h.append(w, r, acc, path)
	case http.MethodGet:
		h.read(w, r, acc, path)
	case http.MethodHead:
		h.head(w, r, acc, path)
	case http.MethodDelete:
		h.delete(w, r, acc, path)
	default:
		hdr.Set("Allow", "DELETE, GET, HEAD, POST, PUT")
		h.fail(w, methodNotAllowed(r))
	}
}

func methodNotAllowed(r *http.Request) *wire.Error {
	return &wire.Error{Message: fmt.Sprintf("method %s not allowed on %s", r.Method, r.URL.Path), Type: wire.TypeInvalidRequest, Code: "method_not_allowed", Status: http.StatusMethodNotAllowed}
}

// open returns the stream at path for acc: a token's tenant is the one
// it was issued to, and the token must be the stream's.
func (h *Handler) open(ctx context.Context, acc Access, path string) (*store.Stream, *wire.Error) {
	st, err := h.deps.Store.Open(ctx, acc.Tenant, path)
	if err != nil {
		return nil, storeError(err)
	}
	if acc.Token != "" {
		if t, ok := acc.Verify(acc.Token, st.ID); !ok || t != acc.Tenant {
			return nil, forbiddenToken()
		}
	}
	return st, nil
}

func forbiddenToken() *wire.Error {
	return &wire.Error{Message: "the resume token is not valid for this stream, or has expired", Type: wire.TypeInvalidRequest, Param: "token", Code: "invalid_resume_token", Status: http.StatusForbidden}
}

// storeError maps the store's errors to the protocol's statuses.
func storeError(err error) *wire.Error {
	var closed *store.ClosedError
	switch {
	case errors.Is(err, store.ErrNotFound):
		return &wire.Error{Message: "no stream at this path", Type: wire.TypeNotFound, Code: "stream_not_found", Status: http.StatusNotFound}
	case errors.Is(err, store.ErrGone):
		return &wire.Error{Message: "the stream was deleted, or the data asked for is past the log's retention", Type: wire.TypeNotFound, Code: "stream_gone", Status: http.StatusGone}
	case errors.Is(err, store.ErrConflict):
		return &wire.Error{Message: "a stream exists at this path with another configuration", Type: wire.TypeInvalidRequest, Code: "stream_exists", Status: http.StatusConflict}
	case errors.Is(err, store.ErrSeqConflict):
		return &wire.Error{Message: "Stream-Seq must be above the last one", Type: wire.TypeInvalidRequest, Param: hSeq, Code: "stream_seq_conflict", Status: http.StatusConflict}
	case errors.Is(err, store.ErrBadForkOffset):
		return badRequest(hForkOffset, "the fork offset is past the source stream's data")
	case errors.As(err, &closed):
		return &wire.Error{Message: "the stream is closed", Type: wire.TypeInvalidRequest, Code: "stream_closed", Status: http.StatusConflict}
	case errors.Is(err, wire.ErrBadCursor):
		return badRequest("offset", "not an offset of this stream")
	}
	return &wire.Error{Message: "The relay's storage did not answer; retry the request.", Type: wire.TypeServer, Code: "unavailable", Status: http.StatusServiceUnavailable, Cause: err}
}

func badRequest(param, format string, args ...any) *wire.Error {
	return &wire.Error{Message: fmt.Sprintf(format, args...), Type: wire.TypeInvalidRequest, Param: param, Code: "invalid_value", Status: http.StatusBadRequest}
}

func (h *Handler) fail(w http.ResponseWriter, e *wire.Error) {
	if e.Cause != nil {
		h.deps.Logger.Warn("durable streams: storage error", "err", e.Cause)
	}
	h.deps.WriteError(w, e)
}

// key returns the offsets' key.
func (h *Handler) key(ctx context.Context) (*wire.CursorKey, *wire.Error) {
	k, err := h.deps.Offsets(ctx)
	if err != nil {
		return nil, storeError(err)
	}
	return k, nil
}

// head answers HEAD: the stream's metadata, without touching its TTL.
func (h *Handler) head(w http.ResponseWriter, r *http.Request, acc Access, path string) {
	st, e := h.open(r.Context(), acc, path)
	if e != nil {
		h.fail(w, e)
		return
	}
	t, err := h.deps.Store.TailOf(r.Context(), st)
	if err != nil {
		h.fail(w, storeError(err))
		return
	}
	k, e := h.key(r.Context())
	if e != nil {
		h.fail(w, e)
		return
	}
	hdr := w.Header()
	h.describe(hdr, st)
	hdr.Set("Content-Type", st.ContentType)
	hdr.Set(hNextOffset, k.Offset(t.Offset))
	hdr.Set("Cache-Control", "no-store")
	if t.Closed {
		hdr.Set(hClosed, "true")
	}
	w.WriteHeader(http.StatusOK)
}

// describe sets the headers naming the relay stream and the stream's
// expiry.
func (h *Handler) describe(hdr http.Header, st *store.Stream) {
	hdr.Set(HeaderStreamID, st.ID)
	if st.TTL != nil {
		hdr.Set(hTTL, fmt.Sprint(*st.TTL))
	}
	if st.ExpiresAt != nil {
		hdr.Set(hExpiresAt, st.ExpiresAt.UTC().Format(time.RFC3339Nano))
	}
}

// delete answers DELETE.
func (h *Handler) delete(w http.ResponseWriter, r *http.Request, acc Access, path string) {
	st, e := h.open(r.Context(), acc, path)
	if e != nil {
		h.fail(w, e)
		return
	}
	if err := h.deps.Store.Delete(r.Context(), st); err != nil {
		h.fail(w, storeError(err))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
