package edge

import (
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/relaydev/relay/relay/wire"
)

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/v1/chat/completions", methods{http.MethodPost: s.handleChat})
	mux.Handle("/v1/embeddings", methods{http.MethodPost: s.handleEmbeddings})   // handler_forward.go
	mux.Handle("/v1/completions", methods{http.MethodPost: s.handleCompletions}) // handler_forward.go
	mux.Handle("/v1/responses", methods{http.MethodPost: s.handleResponses})
	mux.Handle("/v1/responses/{id}", methods{http.MethodGet: s.handleResponse})
	mux.Handle("/v1/responses/{id}/cancel", methods{http.MethodPost: s.handleResponseCancel})
	mux.Handle("/v1/messages", methods{http.MethodPost: s.handleMessages})
	mux.Handle("/v1/messages/{id}", methods{http.MethodGet: s.handleMessage})
	mux.Handle("/v1/messages/count_tokens", methods{http.MethodPost: s.handleCountTokens})
	mux.Handle("/v1/streams/{id}", methods{http.MethodGet: s.handleStream, http.MethodDelete: s.handleCancel})
	mux.Handle("/v1/ws", methods{http.MethodGet: s.handleWS})
	s.chatRoutes(mux) // handler_chats.go: /v1/chats, the AI SDK's useChat
	mux.Handle("/v1/models", methods{http.MethodGet: s.handleModels})
	mux.Handle("/v1/models/{id...}", methods{http.MethodGet: s.handleModel})
	mux.Handle("/healthz", methods{http.MethodGet: handleHealth})
	mux.Handle("/readyz", methods{http.MethodGet: s.handleReady})
	mux.Handle("/v1/relay/status", methods{http.MethodGet: s.handleRelayStatus})
	mux.Handle("/v1/relay/usage", methods{http.MethodGet: s.handleUsage})
	mux.Handle(s.durableStreams()) // durable_streams.go
	s.opsRoutes(mux)               // /metrics, /dashboard, the demo (dashboard.go)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, &wire.Error{
			Message: fmt.Sprintf("unknown URL (%s %s)", r.Method, r.URL.Path),
			Type:    wire.TypeInvalidRequest,
			Code:    CodeUnknownURL,
			Status:  http.StatusNotFound,
		})
	})
	return routed{mux}
}

// methods routes a path by method, answering any other method with an
// OpenAI-style 405 (ServeMux's own is plain text).
type methods map[string]http.HandlerFunc

func (m methods) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h, ok := m[r.Method]; ok {
		h(w, r)
		return
	}
	allowed := make([]string, 0, len(m))
	for method := range m {
		allowed = append(allowed, method)
	}
	slices.Sort(allowed)
	w.Header().Set("Allow", strings.Join(allowed, ", "))
	writeError(w, &wire.Error{
		Message: fmt.Sprintf("method %s not allowed on %s", r.Method, r.URL.Path),
		Type:    wire.TypeInvalidRequest,
		Code:    CodeMethodNotAllowed,
		Status:  http.StatusMethodNotAllowed,
	})
}
