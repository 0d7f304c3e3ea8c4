package mockupstream

import (
	"fmt"
	"log/slog"
	"net/http"
	"slices"
)

// turn is a request of the Messages or Responses API as the answer model
// sees it: the conversation as chat messages, so every dialect gets the
// same answer, directives and continuation as chat completions.
type turn struct {
	dialect   string // for logs
	model     string
	messages  []Message
	maxTokens *int
	stream    bool
}

// dialectErrors writes an error in a dialect's own shape; param may be "".
type dialectErrors func(w http.ResponseWriter, status int, message, param string)

// prepare does for t what handleChat does before it answers: checks the
// model and the messages, counts the conversation, draws its faults,
// stalls before answering and sends an injected status, each refusal in the
// dialect's shape (fail). ok is false when the request was answered.
func (s *Server) prepare(w http.ResponseWriter, r *http.Request, t turn, fail dialectErrors) (rep reply, f faults, ok bool) {
	if !slices.Contains(s.cfg.Models, t.model) {
		fail(w, http.StatusNotFound, fmt.Sprintf("model: %s", t.model), "model")
		return reply{}, faults{}, false
	}
	if len(t.messages) == 0 {
		fail(w, http.StatusBadRequest, "messages: at least one message is required", "messages")
		return reply{}, faults{}, false
	}
	if t.maxTokens != nil && *t.maxTokens < 1 {
		fail(w, http.StatusBadRequest, fmt.Sprintf("max_tokens: must be at least 1, got %d", *t.maxTokens), "max_tokens")
		return reply{}, faults{}, false
	}
	conv := resolveConversation(t.messages, s.cfg.Tokens)
	n := s.stats.conversation(conv.key, r.Header)
	if s.refusedTooLong(w, t.dialect, t.model, t.messages, t.maxTokens) {
		return reply{}, faults{}, false
	}
	f, err := s.faultsFor(t.model, t.messages, n)
	if err != nil {
		fail(w, http.StatusBadRequest, err.Error(), "messages")
		return reply{}, faults{}, false
	}
	s.logger.LogAttrs(r.Context(), slog.LevelDebug, "mock-upstream: "+t.dialect+" request",
		slog.String("conversation", conv.key), slog.Int("request", n), slog.String("faults", f.spec),
		slog.Int("prefix_bytes", len(conv.prefix)), slog.Bool("stream", t.stream))
	if !f.before(r) {
		return reply{}, faults{}, false
	}
	if f.status != 0 {
		if f.retryAfter != "" {
			w.Header().Set("Retry-After", f.retryAfter)
		}
		if f.retryAfterMS != "" {
			w.Header().Set("retry-after-ms", f.retryAfterMS)
		}
		fail(w, f.status, fmt.Sprintf("mock-upstream: injected fault status=%d", f.status), "")
		return reply{}, faults{}, false
	}
	if (f.rejectPrefill || slices.Contains(s.cfg.NoPrefill, t.model)) && t.messages[len(t.messages)-1].Role == roleAssistant {
		fail(w, http.StatusBadRequest, "This model does not support assistant message prefill. The conversation must end with a user message.", "messages")
		return reply{}, faults{}, false
	}
	return s.plan(chatRequest{Model: t.model, Messages: t.messages, MaxTokens: t.maxTokens}, conv, f), f, true
}

// refusedTooLong answers 400 to a request of dialect ("chat", "responses"
// or "messages") whose messages and maxTokens do not fit model's context
// window, in the words its provider uses, and reports whether it did.
func (s *Server) refusedTooLong(w http.ResponseWriter, dialect, model string, messages []Message, maxTokens *int) bool {
	window, ok := s.cfg.ContextWindows[model]
	prompt, answer := promptTokens(messages), 0
	if maxTokens != nil {
		answer = *maxTokens
	}
	needed := prompt + answer
	switch {
	case !ok || needed <= window:
		return false
	case dialect == "messages" && prompt > window:
		writeClaudeError(w, http.StatusBadRequest, fmt.Sprintf("prompt is too long: %d tokens > %d maximum", prompt, window), "")
		return true
	case dialect == "messages":
		writeClaudeError(w, http.StatusBadRequest, fmt.Sprintf("input length and `max_tokens` exceed context limit: %d + %d > %d, "+
			"decrease input length or `max_tokens` and try again", prompt, answer, window), "")
		return true
	}
	e := badRequest(fmt.Sprintf("This model's maximum context length is %d tokens. However, your messages resulted in %d tokens. "+
		"Please reduce the length of the messages.", window, needed), "messages")
	e.Code = ptr("context_length_exceeded")
	writeError(w, http.StatusBadRequest, e)
	return true
}

// tokens paces and shapes the content tokens of a streamed reply the way
// the chat stream does: stalls, then an early end, each after its count of
// tokens. send writes one token; it returns false if the stream ended
// early (the caller stops writing) or failed.
func (s *Server) tokens(r *http.Request, out *eventWriter, rep reply, f faults, send func(string) error, endEarly func(ending)) bool {
	for sent := 0; ; sent++ {
		if f.stallFor > 0 && sent == f.stallAfter {
			if out.pause(r.Context(), f.stallFor) != nil {
				return false
			}
		}
		if f.end != endNormal && sent == f.endAfter {
			endEarly(f.end)
			return false
		}
		if sent == len(rep.tokens) {
			return true
		}
		if out.pause(r.Context(), s.cfg.TokenInterval) != nil || send(rep.tokens[sent]) != nil {
			return false
		}
	}
}

// named writes one event with a name, as Anthropic and the Responses API
// send every event.
func (e *eventWriter) named(name string, v any) error {
	b, err := marshal(v)
	if err != nil {
		return err
	}
	return e.write(fmt.Appendf(nil, "event: %s\ndata: %s\n\n", name, b))
}

// openStream sends the headers of an event stream and returns its writer.
func (s *Server) openStream(w http.ResponseWriter, f faults) *eventWriter {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	return &eventWriter{w: w, rc: http.NewResponseController(w), split: f.splitUTF8, commentEvery: s.cfg.CommentInterval}
}
