package mockupstream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"
)

const (
	// shutdownGrace is how long Serve lets running responses finish once its
	// context is done, before it closes their connections.
	shutdownGrace = 5 * time.Second
	// readHeaderTimeout keeps a client that never sends its headers from
	// holding a connection forever.
	readHeaderTimeout = 10 * time.Second
)

// Server is the mock upstream. Create it with New, then either mount
// Handler in an httptest.Server or run Serve on a listener.
type Server struct {
	cfg    Config // with defaults applied
	logger *slog.Logger
	mux    *http.ServeMux

	apiKeys atomic.Pointer[map[string]bool] // empty: no authentication
	weather atomic.Pointer[Weather]
	faults  atomic.Pointer[faults] // Config.Faults parsed, or SetFaults's
	stats   *stats
	ids     atomic.Uint64

	// now stamps the "created" field; tests replace it for golden output.
	now func() time.Time
}

// New validates cfg and returns a server. A nil logger discards logs.
func New(cfg Config, logger *slog.Logger) (*Server, error) {
	f, err := cfg.validate()
	if err != nil {
		return nil, fmt.Errorf("mockupstream: %w", err)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{
		cfg:    cfg.withDefaults(),
		logger: logger,
		mux:    http.NewServeMux(),
		stats:  newStats(),
		now:    time.Now,
	}
	s.SetAPIKeys(cfg.APIKeys)
	s.weather.Store(&s.cfg.Weather)
	s.faults.Store(&f)
	s.mux.HandleFunc("POST /v1/chat/completions", s.handleChat)
	s.mux.HandleFunc("POST /v1/messages", s.handleMessages)
	s.mux.HandleFunc("POST /v1/responses", s.handleResponses)
	s.mux.HandleFunc("POST /v1/embeddings", s.handleEmbeddings)   // embeddings.go
	s.mux.HandleFunc("POST /v1/completions", s.handleCompletions) // completions.go
	s.mux.HandleFunc("GET /v1/models", s.handleModels)
	s.mux.HandleFunc("GET /mock/stats", s.handleStats)
	s.mux.HandleFunc("PUT /mock/weather", s.handleWeather)
	s.mux.HandleFunc("PUT /mock/faults", s.handleFaults) // faults.go
	s.mux.HandleFunc("/", handleUnknown)
	return s, nil
}

// Handler returns the HTTP handler serving every endpoint.
func (s *Server) Handler() http.Handler {
	return s.mux
}

// Serve serves HTTP on ln until ctx is done, then shuts down: it stops
// accepting, gives running responses a grace period of 5s to finish and then
// closes their connections. It returns nil after a clean shutdown, and an
// error if serving failed or the grace period ran out. Serve closes ln.
//
// It speaks HTTP/1.1 and, on the same port, HTTP/2 without TLS to a client
// that opens with the HTTP/2 preface (h2c with prior knowledge; a provider
// with http2_prior_knowledge): any client works, and a worker's streams
// may share connections as they do with a real provider over TLS. Over
// HTTP/2 a cut (cut_after) resets the stream (RST_STREAM) where HTTP/1.1
// closes the connection; either way the client reads an error, never a
// clean end.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	hs := &http.Server{
		Handler:           s.mux,
		ReadHeaderTimeout: readHeaderTimeout,
		ErrorLog:          slog.NewLogLogger(s.logger.Handler(), slog.LevelWarn),
		Protocols:         new(http.Protocols),
	}
	hs.Protocols.SetHTTP1(true)
	hs.Protocols.SetUnencryptedHTTP2(true)
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	select {
	case err := <-served:
		return fmt.Errorf("mockupstream: serve: %w", err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
	defer cancel()
	err := hs.Shutdown(shutdownCtx)
	if err != nil {
		_ = hs.Close()
	}
	if serveErr := <-served; !errors.Is(serveErr, http.ErrServerClosed) {
		return fmt.Errorf("mockupstream: serve: %w", serveErr)
	}
	if err != nil {
		return fmt.Errorf("mockupstream: shutdown: %w", err)
	}
	return nil
}

// SetAPIKeys replaces the accepted API keys, taking effect for the next
// request; a stream already running is not affected. An empty list turns
// authentication off.
func (s *Server) SetAPIKeys(keys []string) {
	set := make(map[string]bool, len(keys))
	for _, k := range keys {
		set[k] = true
	}
	s.apiKeys.Store(&set)
}

// authorized checks the bearer token and answers 401 if it is not accepted.
func (s *Server) authorized(w http.ResponseWriter, r *http.Request) bool {
	keys := *s.apiKeys.Load()
	if len(keys) == 0 {
		return true
	}
	key, ok := bearer(r)
	if ok && key != "" && keys[key] {
		return true
	}
	msg := "You didn't provide an API key. Provide it in the Authorization header as Bearer <key>."
	if ok {
		msg = "Incorrect API key provided."
	}
	writeError(w, http.StatusUnauthorized, errorBody(http.StatusUnauthorized, msg))
	return false
}

// bearer returns the request's bearer token, and whether it sent an
// Authorization header at all; a header of another scheme yields "".
func bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return "", false
	}
	key, ok := strings.CutPrefix(h, "Bearer ")
	if !ok {
		return "", true
	}
	return key, true
}

// handleUnknown answers every other path the way the real API does, with a
// JSON error rather than Go's plain-text 404 page.
func handleUnknown(w http.ResponseWriter, r *http.Request) {
	msg := fmt.Sprintf("Invalid URL (%s %s)", r.Method, r.URL.Path)
	writeError(w, http.StatusNotFound, errorBody(http.StatusNotFound, msg))
}
