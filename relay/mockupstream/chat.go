package mockupstream

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// maxBodyBytes caps a request body. A continuation carries the whole answer
// so far, so the cap is generous.
const maxBodyBytes = 8 << 20

// systemFingerprint is sent in every completion, as the real API does.
const systemFingerprint = "fp_mock"

// reply is what one response will carry, decided before the first byte.
type reply struct {
	id      string
	created int64
	model   string
	tokens  []string // content chunks, after continuation, overlap and max_tokens
	finish  string   // "stop", or "length" when max_tokens cut the answer
	usage   usage
	// reasoning is sent as reasoning_content before the first token.
	reasoning []string
	// logprobs and topLogprobs are what the request asked for.
	logprobs    bool
	topLogprobs int
}

// handleChat answers POST /v1/chat/completions. Checks come in the real
// API's order (key, body, model), then the conversation is counted, so that
// times=K sees only requests that reached the model, and the faults decide
// how, and whether, the answer goes out.
func (s *Server) handleChat(w http.ResponseWriter, r *http.Request) {
	s.stats.chatRequest(r)
	w = &statusCounter{ResponseWriter: w, stats: s.stats}
	if !s.authorized(w, r) {
		return
	}
	req, ok := s.decodeChat(w, r)
	if !ok {
		return
	}
	conv := resolveConversation(req.Messages, s.cfg.Tokens)
	n := s.stats.conversation(conv.key, r.Header)
	if s.refusedTooLong(w, "chat", req.Model, req.Messages, req.limit()) {
		return
	}
	f, err := s.faultsFor(req.Model, req.Messages, n)
	if err != nil {
		writeError(w, http.StatusBadRequest, badRequest(err.Error(), "messages"))
		return
	}
	s.logger.LogAttrs(r.Context(), slog.LevelDebug, "mock-upstream: chat request",
		slog.String("conversation", conv.key), slog.Int("request", n), slog.String("faults", f.spec),
		slog.Int("prefix_bytes", len(conv.prefix)), slog.Bool("stream", req.Stream))
	if conv.ignoredPrefill {
		s.logger.LogAttrs(r.Context(), slog.LevelWarn, "mock-upstream: assistant prefill is not a prefix of the answer; answering from the start",
			slog.String("conversation", conv.key))
	}
	if !f.before(r) {
		return
	}
	if f.status != 0 {
		if f.retryAfter != "" {
			w.Header().Set("Retry-After", f.retryAfter)
		}
		if f.retryAfterMS != "" {
			w.Header().Set("retry-after-ms", f.retryAfterMS)
		}
		writeError(w, f.status, errorBody(f.status, fmt.Sprintf("mock-upstream: injected fault status=%d", f.status)))
		return
	}
	if (f.rejectPrefill || slices.Contains(s.cfg.NoPrefill, req.Model)) && req.Messages[len(req.Messages)-1].Role == roleAssistant {
		writeError(w, http.StatusBadRequest, badRequest(
			"This model does not support assistant message prefill. The conversation must end with a user message.", "messages"))
		return
	}
	rep := s.plan(req, conv, f)
	if req.Stream {
		s.stream(w, r, rep, f, req.StreamOptions != nil && req.StreamOptions.IncludeUsage)
		return
	}
	s.complete(w, r, rep)
}

// decodeChat reads and checks the request body, answering the error itself
// when it is not acceptable.
func (s *Server) decodeChat(w http.ResponseWriter, r *http.Request) (chatRequest, bool) {
	var req chatRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBodyBytes)).Decode(&req); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, http.StatusRequestEntityTooLarge, errorBody(http.StatusRequestEntityTooLarge,
				fmt.Sprintf("Request body larger than %d bytes.", maxBodyBytes)))
			return req, false
		}
		writeError(w, http.StatusBadRequest, badRequest("We could not parse the JSON body of your request: "+err.Error(), ""))
		return req, false
	}
	if !slices.Contains(s.cfg.Models, req.Model) {
		e := errorBody(http.StatusNotFound, fmt.Sprintf("The model `%s` does not exist or you do not have access to it.", req.Model))
		e.Param, e.Code = ptr("model"), ptr("model_not_found")
		writeError(w, http.StatusNotFound, e)
		return req, false
	}
	if len(req.Messages) == 0 {
		writeError(w, http.StatusBadRequest, badRequest("messages: must contain at least one message.", "messages"))
		return req, false
	}
	for _, limit := range [...]struct {
		name  string
		value *int
	}{{"max_tokens", req.MaxTokens}, {"max_completion_tokens", req.MaxCompletionTokens}} {
		if limit.value != nil && *limit.value < 1 {
			writeError(w, http.StatusBadRequest, badRequest(fmt.Sprintf("%s: must be at least 1, got %d.", limit.name, *limit.value), limit.name))
			return req, false
		}
	}
	return req, true
}

func badRequest(message, param string) apiError {
	e := errorBody(http.StatusBadRequest, message)
	if param != "" {
		e.Param = &param
	}
	return e
}

// faultsFor returns the faults that apply to the n-th request of a
// conversation, for model: the request's own directives if it has any,
// else the server's, and none once the conversation is past their times
// or for a model they do not name.
func (s *Server) faultsFor(model string, messages []Message, n int) (faults, error) {
	f, found, err := requestFaults(messages)
	if err != nil {
		return faults{}, err
	}
	if !found {
		f = *s.faults.Load()
	}
	if !found && f.spec == "" {
		kind, drawn := s.weather.Load().draw(s.cfg.Tokens)
		if kind != "" {
			s.stats.weather(kind)
		}
		return drawn, nil
	}
	if f.times != 0 && n > f.times || f.model != "" && f.model != model {
		return faults{}, nil
	}
	return f, nil
}

// limit is the answer's token limit the request sets, nil if none:
// max_completion_tokens, else max_tokens.
func (req chatRequest) limit() *int { return cmp.Or(req.MaxCompletionTokens, req.MaxTokens) }

// plan decides the content of the response: the rest of the answer after
// the client's prefix, preceded by the overlap fault's repeated text, cut
// to max_tokens.
func (s *Server) plan(req chatRequest, conv conversation, f faults) reply {
	tokens := rest(conv.answer, conv.prefix)
	if f.overlap > 0 && conv.prefix != "" {
		tokens = append([]string{lastRunes(conv.prefix, f.overlap)}, tokens...)
	}
	finish := "stop"
	if limit := req.limit(); limit != nil && *limit < len(tokens) {
		tokens, finish = tokens[:*limit], "length"
	}
	prompt := promptTokens(req.Messages)
	rep := reply{
		id:          fmt.Sprintf("chatcmpl-mock-%d", s.ids.Add(1)),
		created:     s.now().Unix(),
		model:       req.Model,
		tokens:      tokens,
		finish:      finish,
		usage:       usage{PromptTokens: prompt, CompletionTokens: len(tokens), TotalTokens: prompt + len(tokens)},
		logprobs:    req.Logprobs,
		topLogprobs: req.TopLogprobs,
	}
	if f.reasoning > 0 {
		rep.reasoning = reasoningFor(conv.key, f.reasoning)
		rep.usage.CompletionTokens += f.reasoning
		rep.usage.TotalTokens += f.reasoning
		// A continuation repeats the prompt of the request it continues,
		// which a provider with a prompt cache has cached.
		cached := 0
		if conv.prefix != "" {
			cached = promptTokens(req.Messages[:len(req.Messages)-1])
		}
		rep.usage.PromptTokensDetails = &promptDetails{CachedTokens: cached}
		rep.usage.CompletionTokensDetails = &completionDetails{ReasoningTokens: f.reasoning}
	}
	return rep
}

// logprobsOf is the logprobs object of tokens, nil unless the request
// asked for logprobs.
func (rep reply) logprobsOf(tokens ...string) any {
	if !rep.logprobs {
		return nil
	}
	lp := &logprobs{Content: []tokenLogprob{}}
	for _, t := range tokens {
		lp.Content = append(lp.Content, tokenLogprobs(t, rep.topLogprobs))
	}
	return lp
}

// promptTokens estimates the prompt size roughly as a real tokenizer would:
// four runes a token plus three tokens of framing per message. Usage needs
// a number; tests should rely only on it being deterministic.
func promptTokens(messages []Message) int {
	n := 0
	for _, m := range messages {
		n += 3 + (utf8.RuneCountInString(m.Content)+3)/4
	}
	return n
}

// complete answers a non-streaming request after the time the stream would
// have taken. Of the stream-shaping faults, only overlap applies here.
func (s *Server) complete(w http.ResponseWriter, r *http.Request, rep reply) {
	if wait(r.Context(), time.Duration(len(rep.tokens))*s.cfg.TokenInterval, 0, nil) != nil {
		return
	}
	writeJSON(w, http.StatusOK, completion{
		ID:                rep.id,
		Object:            "chat.completion",
		Created:           rep.created,
		Model:             rep.model,
		SystemFingerprint: systemFingerprint,
		Choices: []completionChoice{{
			Message: completionMessage{Role: roleAssistant, Content: strings.Join(rep.tokens, ""),
				ReasoningContent: strings.Join(rep.reasoning, "")},
			Logprobs:     rep.logprobsOf(rep.tokens...),
			FinishReason: rep.finish,
		}},
		Usage: rep.usage,
	})
}
