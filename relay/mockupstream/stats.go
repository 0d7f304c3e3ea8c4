package mockupstream

import (
	"maps"
	"net/http"
	"slices"
	"sync"
)

// Stats counts what the mock was asked, so that a test can assert "exactly
// one upstream call" or "no request while the breaker was open". It is also
// served as JSON at GET /mock/stats.
type Stats struct {
	// ChatRequests counts every POST /v1/chat/completions, including the
	// ones rejected for a bad API key or body.
	ChatRequests int `json:"chat_requests"`
	// MessagesRequests and ResponsesRequests count every POST /v1/messages
	// and /v1/responses, as ChatRequests does for chat.
	MessagesRequests  int `json:"messages_requests"`
	ResponsesRequests int `json:"responses_requests"`
	// ByStatus counts requests, of every dialect, by the HTTP status they
	// were answered with. A stream cut by a fault counts as 200; a request
	// whose client left during stall_before, before any response, or
	// that a reset fault dropped, is not counted here.
	ByStatus map[int]int `json:"by_status"`
	// ByConversation counts, by conversation key (see ConversationKey), the
	// chat requests that passed authentication and request checks (body,
	// model, max_tokens). Retries and continuations of one conversation
	// count under the same key.
	ByConversation map[string]int `json:"by_conversation"`
	// TraceParents holds, by conversation key, the traceparent headers of
	// those requests that sent one, in order: a test sees which trace
	// every call belonged to.
	TraceParents map[string][]string `json:"traceparents,omitempty"`
	// RequestIDs holds, by conversation key, the X-Request-Id headers of
	// those requests that sent one, in order.
	RequestIDs map[string][]string `json:"request_ids,omitempty"`
	// Weather counts the faults the weather drew, by kind: rate_limited,
	// cut, stall.
	Weather map[string]int `json:"weather,omitempty"`
	// ByKey counts the chat, messages and responses requests by the API
	// key they sent (bearer or x-api-key; "" for none), refused ones
	// included: a test sees which keys took traffic. These are the fake
	// provider's keys, never real ones.
	ByKey map[string]int `json:"by_key,omitempty"`
	// ModelsByKey counts GET /v1/models, the relay's key check, by key.
	ModelsByKey map[string]int `json:"models_by_key,omitempty"`
	// ByProtocol counts the chat, messages, responses and model list
	// requests by the protocol they came over ("HTTP/1.1", "HTTP/2.0"): a
	// test sees that a provider with http2_prior_knowledge took h2c.
	ByProtocol map[string]int `json:"by_protocol,omitempty"`
	// FirstTokenAbandoned counts the streams whose client went away while
	// they waited for their first token (TTFT, first_token_after).
	FirstTokenAbandoned int `json:"first_token_abandoned"`
}

// stats is the live, locked version of Stats.
type stats struct {
	mu             sync.Mutex
	chatRequests   int
	byStatus       map[int]int
	byConversation map[string]int
	traceParents   map[string][]string
	requestIDs     map[string][]string
	drawn          map[string]int // by weather
	byKey, models  map[string]int // generation requests and model lists, by key
	byProto        map[string]int // both, by protocol
	abandoned      int            // FirstTokenAbandoned

	// The other dialects' requests, counted as chatRequests is.
	messagesRequests, responsesRequests int
}

func newStats() *stats {
	return &stats{byStatus: make(map[int]int), byConversation: make(map[string]int), traceParents: make(map[string][]string), requestIDs: make(map[string][]string), drawn: make(map[string]int),
		byKey: make(map[string]int), models: make(map[string]int), byProto: make(map[string]int)}
}

func (s *stats) weather(kind string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.drawn[kind]++
}

func (s *stats) firstTokenAbandoned() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.abandoned++
}

func (s *stats) chatRequest(r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.chatRequests++
	s.byKey[presentedKey(r)]++
	s.byProto[r.Proto]++
}

func (s *stats) modelsRequest(r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.models[presentedKey(r)]++
	s.byProto[r.Proto]++
}

// presentedKey is the API key r sent, as x-api-key or a bearer token.
func presentedKey(r *http.Request) string {
	if k := r.Header.Get("x-api-key"); k != "" {
		return k
	}
	k, _ := bearer(r)
	return k
}

// conversation counts a request of the conversation, with its
// traceparent and X-Request-Id headers (h), and returns its 1-based number
// within it, which times=K compares against.
func (s *stats) conversation(key string, h http.Header) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if v := h.Get("traceparent"); v != "" {
		s.traceParents[key] = append(s.traceParents[key], v)
	}
	if v := h.Get("X-Request-Id"); v != "" {
		s.requestIDs[key] = append(s.requestIDs[key], v)
	}
	s.byConversation[key]++
	return s.byConversation[key]
}

func (s *stats) status(code int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.byStatus[code]++
}

func (s *stats) snapshot() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := Stats{
		ChatRequests:        s.chatRequests,
		MessagesRequests:    s.messagesRequests,
		ResponsesRequests:   s.responsesRequests,
		ByStatus:            maps.Clone(s.byStatus),
		ByConversation:      maps.Clone(s.byConversation),
		FirstTokenAbandoned: s.abandoned,
	}
	st.TraceParents = cloneLists(s.traceParents)
	st.RequestIDs = cloneLists(s.requestIDs)
	if len(s.drawn) > 0 {
		st.Weather = maps.Clone(s.drawn)
	}
	if len(s.byKey) > 0 {
		st.ByKey = maps.Clone(s.byKey)
	}
	if len(s.models) > 0 {
		st.ModelsByKey = maps.Clone(s.models)
	}
	if len(s.byProto) > 0 {
		st.ByProtocol = maps.Clone(s.byProto)
	}
	return st
}

// Stats returns a snapshot of the counters.
func (s *Server) Stats() Stats {
	return s.stats.snapshot()
}

func (s *Server) handleStats(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.Stats())
}

// statusCounter records the status of each chat response in Stats. Unwrap
// lets http.ResponseController reach the connection's Flush.
type statusCounter struct {
	http.ResponseWriter
	stats *stats
	wrote bool
}

func (c *statusCounter) WriteHeader(code int) {
	if !c.wrote {
		c.wrote = true
		c.stats.status(code)
	}
	c.ResponseWriter.WriteHeader(code)
}

func (c *statusCounter) Write(b []byte) (int, error) {
	if !c.wrote {
		c.WriteHeader(http.StatusOK)
	}
	return c.ResponseWriter.Write(b)
}

func (c *statusCounter) Unwrap() http.ResponseWriter {
	return c.ResponseWriter
}

func (s *stats) messagesRequest(r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.messagesRequests++
	s.byKey[presentedKey(r)]++
	s.byProto[r.Proto]++
}

func (s *stats) responsesRequest(r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.responsesRequests++
	s.byKey[presentedKey(r)]++
	s.byProto[r.Proto]++
}

// cloneLists copies m deeply; nil if it is empty.
func cloneLists(m map[string][]string) map[string][]string {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string][]string, len(m))
	for k, v := range m {
		out[k] = slices.Clone(v)
	}
	return out
}
