package mockupstream

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode"
)

// The Anthropic Messages API, as far as the mock speaks it: POST
// /v1/messages with the same answers, directives and faults as chat
// completions, errors in Anthropic's shape, and a final assistant message
// continued as a prefill.

// messagesRequest holds the request fields the mock looks at.
type messagesRequest struct {
	Model     string          `json:"model"`
	System    json.RawMessage `json:"system"`
	Messages  []claudeMessage `json:"messages"`
	MaxTokens *int            `json:"max_tokens"`
	Stream    bool            `json:"stream"`
	// StopSequences end the answer before the first of them it holds.
	StopSequences []string `json:"stop_sequences"`
}

// claudeMessage is a message whose content is a string or content blocks;
// only text blocks (and the text of tool results) count for the answer.
type claudeMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// claudeText is the text of a content: a string, or the text blocks of an
// array, tool results' text included.
func claudeText(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var blocks []struct {
		Type    string          `json:"type"`
		Text    string          `json:"text"`
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return "", errors.New("content: want a string or an array of content blocks")
	}
	var b strings.Builder
	for _, bl := range blocks {
		switch bl.Type {
		case "text":
			b.WriteString(bl.Text)
		case "tool_result":
			t, err := claudeText(bl.Content)
			if err != nil {
				return "", err
			}
			b.WriteString(t)
		}
	}
	return b.String(), nil
}

// chatMessages is the conversation as the answer model reads it: the
// system prompt as a system message, then the messages' text.
func (m messagesRequest) chatMessages() ([]Message, error) {
	var out []Message
	system, err := claudeText(m.System)
	if err != nil {
		return nil, fmt.Errorf("system: %w", err)
	}
	if system != "" {
		out = append(out, Message{Role: roleSystem, Content: system})
	}
	for i, msg := range m.Messages {
		if msg.Role != roleUser && msg.Role != roleAssistant {
			return nil, fmt.Errorf("messages.%d.role: must be user or assistant, got %q", i, msg.Role)
		}
		text, err := claudeText(msg.Content)
		if err != nil {
			return nil, fmt.Errorf("messages.%d.%w", i, err)
		}
		out = append(out, Message{Role: msg.Role, Content: text})
	}
	return out, nil
}

// handleMessages answers POST /v1/messages.
func (s *Server) handleMessages(w http.ResponseWriter, r *http.Request) {
	s.stats.messagesRequest(r)
	w = &statusCounter{ResponseWriter: w, stats: s.stats}
	if !s.authorizedAnthropic(w, r) {
		return
	}
	var req messagesRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBodyBytes)).Decode(&req); err != nil {
		writeClaudeError(w, http.StatusBadRequest, "invalid JSON body: "+err.Error(), "")
		return
	}
	if req.MaxTokens == nil {
		writeClaudeError(w, http.StatusBadRequest, "max_tokens: Field required", "")
		return
	}
	msgs, err := req.chatMessages()
	if err != nil {
		writeClaudeError(w, http.StatusBadRequest, err.Error(), "")
		return
	}
	if n := len(msgs); n > 0 && msgs[n-1].Role == roleAssistant && strings.TrimRightFunc(msgs[n-1].Content, unicode.IsSpace) != msgs[n-1].Content {
		// As Anthropic does: a prefill must not end in whitespace.
		writeClaudeError(w, http.StatusBadRequest, "messages: final assistant content cannot end with trailing whitespace", "")
		return
	}
	rep, f, ok := s.prepare(w, r, turn{dialect: "messages", model: req.Model, messages: msgs, maxTokens: req.MaxTokens, stream: req.Stream}, writeClaudeError)
	if !ok {
		return
	}
	rep.id = fmt.Sprintf("msg_mock_%d", s.ids.Add(1))
	a := newClaudeAnswer(rep, msgs, req.StopSequences)
	if req.Stream {
		s.streamClaude(w, r, a, f)
		return
	}
	if wait(r.Context(), time.Duration(len(a.tokens))*s.cfg.TokenInterval, 0, nil) != nil {
		return
	}
	m := claudeMessageOf(a, a.usage)
	m.StopReason, m.StopSequence = a.stopReason(), a.stopSeq()
	if len(a.reasoning) > 0 {
		m.Content = append(m.Content, claudeThinking{Type: "thinking", Thinking: strings.Join(a.reasoning, ""), Signature: a.signature})
	}
	if len(a.tokens) > 0 {
		m.Content = append(m.Content, claudeBlock{Type: "text", Text: strings.Join(a.tokens, "")})
	}
	writeJSON(w, http.StatusOK, m)
}

// claudeResponse is a Message object: the non-streamed answer, and the
// message of message_start with empty content.
type claudeResponse struct {
	ID           string      `json:"id"`
	Type         string      `json:"type"`
	Role         string      `json:"role"`
	Model        string      `json:"model"`
	Content      []any       `json:"content"`
	StopReason   *string     `json:"stop_reason"`
	StopSequence *string     `json:"stop_sequence"`
	Usage        claudeUsage `json:"usage"`
}

type claudeBlock struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type claudeThinking struct {
	Type      string `json:"type"`
	Thinking  string `json:"thinking"`
	Signature string `json:"signature"`
}

// claudeUsage is Anthropic's usage; the cache counts are sent with the
// reasoning directive only, so that other answers stay as they were.
type claudeUsage struct {
	InputTokens              int `json:"input_tokens,omitempty"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens,omitempty"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens,omitempty"`
	OutputTokens             int `json:"output_tokens"`
}

// claudeMessageOf is the Message of a, empty, with usage u.
func claudeMessageOf(a claudeAnswer, u claudeUsage) claudeResponse {
	return claudeResponse{ID: a.id, Type: "message", Role: roleAssistant, Model: a.model, Content: []any{}, Usage: u}
}

// claudeStop is the stop reason of a chat finish reason.
func claudeStop(finish string) *string {
	if finish == "length" {
		return ptr("max_tokens")
	}
	return ptr("end_turn")
}

// streamClaude sends a as Anthropic's events: message_start (with the
// input and cache counts), a ping, the thinking block if any (a delta per
// token, then its signature), one text block with a delta per token,
// message_delta with the stop reason, stop sequence and output tokens,
// message_stop (left out with no_done).
func (s *Server) streamClaude(w http.ResponseWriter, r *http.Request, a claudeAnswer, f faults) {
	out := s.openStream(w, f)
	defer out.clearDeadline()
	type obj = map[string]any
	startUsage := a.usage
	startUsage.OutputTokens = 1
	if out.named("message_start", obj{"type": "message_start", "message": claudeMessageOf(a, startUsage)}) != nil ||
		out.named("ping", obj{"type": "ping"}) != nil || !s.awaitFirstToken(r.Context(), out, f) || !s.streamThinking(r, out, a) {
		return
	}
	text := 0
	if len(a.reasoning) > 0 {
		text = 1
	}
	if out.named("content_block_start", obj{"type": "content_block_start", "index": text, "content_block": claudeBlock{Type: "text"}}) != nil {
		return
	}
	send := func(tok string) error {
		return out.named("content_block_delta", obj{"type": "content_block_delta", "index": text, "delta": obj{"type": "text_delta", "text": tok}})
	}
	endEarly := func(end ending) {
		switch end {
		case endCut:
			panic(http.ErrAbortHandler)
		case endMalformed:
			_ = out.write([]byte("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_\n\n"))
		case endError:
			_ = out.named("error", obj{"type": "error", "error": obj{"type": "overloaded_error", "message": overloaded}})
		}
	}
	if !s.tokens(r, out, a.reply, f, send, endEarly) {
		return
	}
	if out.named("content_block_stop", obj{"type": "content_block_stop", "index": text}) != nil ||
		out.named("message_delta", obj{"type": "message_delta", "delta": obj{"stop_reason": a.stopReason(), "stop_sequence": a.stopSeq()},
			"usage": claudeUsage{OutputTokens: a.usage.OutputTokens}}) != nil {
		return
	}
	if !f.noDone {
		_ = out.named("message_stop", obj{"type": "message_stop"})
	}
}

// streamThinking sends a's thinking as block 0, a delta per token, then
// its signature; false when the client went away.
func (s *Server) streamThinking(r *http.Request, out *eventWriter, a claudeAnswer) bool {
	if len(a.reasoning) == 0 {
		return true
	}
	type obj = map[string]any
	delta := func(d obj) error {
		return out.named("content_block_delta", obj{"type": "content_block_delta", "index": 0, "delta": d})
	}
	if out.named("content_block_start", obj{"type": "content_block_start", "index": 0, "content_block": claudeThinking{Type: "thinking"}}) != nil {
		return false
	}
	for _, tok := range a.reasoning {
		if out.pause(r.Context(), s.cfg.TokenInterval) != nil || delta(obj{"type": "thinking_delta", "thinking": tok}) != nil {
			return false
		}
	}
	return delta(obj{"type": "signature_delta", "signature": a.signature}) == nil &&
		out.named("content_block_stop", obj{"type": "content_block_stop", "index": 0}) == nil
}

// authorizedAnthropic checks the key, sent as x-api-key or, as the
// Anthropic SDK also does, as a bearer token; it answers 401 in
// Anthropic's shape if the key is not accepted.
func (s *Server) authorizedAnthropic(w http.ResponseWriter, r *http.Request) bool {
	keys := *s.apiKeys.Load()
	if len(keys) == 0 {
		return true
	}
	key := r.Header.Get("x-api-key")
	if key == "" {
		key, _ = bearer(r)
	}
	if key != "" && keys[key] {
		return true
	}
	writeClaudeError(w, http.StatusUnauthorized, "invalid x-api-key", "")
	return false
}

// claudeErrorTypes are Anthropic's error types by status.
var claudeErrorTypes = map[int]string{
	http.StatusBadRequest:            "invalid_request_error",
	http.StatusUnauthorized:          "authentication_error",
	http.StatusForbidden:             "permission_error",
	http.StatusNotFound:              "not_found_error",
	http.StatusRequestEntityTooLarge: "request_too_large",
	http.StatusTooManyRequests:       "rate_limit_error",
	529:                              "overloaded_error",
}

// writeClaudeError sends {"type":"error","error":{"type":...,"message":...}}
// with the type Anthropic gives status: api_error for other 5xx,
// invalid_request_error for other 4xx. Anthropic has no param field; the
// message names it.
func writeClaudeError(w http.ResponseWriter, status int, message, _ string) {
	typ, ok := claudeErrorTypes[status]
	switch {
	case ok:
	case status >= 500:
		typ = "api_error"
	default:
		typ = "invalid_request_error"
	}
	writeJSON(w, status, map[string]any{"type": "error", "error": map[string]string{"type": typ, "message": message}})
}
