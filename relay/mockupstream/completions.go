package mockupstream

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// completionsRequest holds the fields of POST /v1/completions (the legacy
// text completions) the mock reads; prompt is a string or an array of
// strings, joined.
type completionsRequest struct {
	Model         string          `json:"model"`
	Prompt        json.RawMessage `json:"prompt"`
	Stream        bool            `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	MaxTokens *int `json:"max_tokens"`
}

// textCompletion is a "text_completion" object: the answer, or one chunk
// of a streamed answer.
type textCompletion struct {
	ID                string       `json:"id"`
	Object            string       `json:"object"`
	Created           int64        `json:"created"`
	Model             string       `json:"model"`
	SystemFingerprint string       `json:"system_fingerprint"`
	Choices           []textChoice `json:"choices"`
	Usage             *usage       `json:"usage,omitempty"`
}

type textChoice struct {
	Text         string  `json:"text"`
	Index        int     `json:"index"`
	Logprobs     any     `json:"logprobs"`
	FinishReason *string `json:"finish_reason"`
}

// handleCompletions answers POST /v1/completions with the answer chat
// gives to one user message holding the prompt (AnswerText), streamed or
// not. The faults apply as for chat: status and stall_before before the
// answer, and cut_after, eof_after, malformed_after and the stalls to a
// stream.
func (s *Server) handleCompletions(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(w, r) {
		return
	}
	var req completionsRequest
	if !s.decodeForwarded(w, r, &req, &req.Model) {
		return
	}
	prompt, err := promptText(req.Prompt)
	if err != nil {
		writeError(w, http.StatusBadRequest, badRequest(err.Error(), "prompt"))
		return
	}
	if req.MaxTokens != nil && *req.MaxTokens < 1 {
		writeError(w, http.StatusBadRequest, badRequest(fmt.Sprintf("max_tokens: must be at least 1, got %d.", *req.MaxTokens), "max_tokens"))
		return
	}
	messages := userMessages([]string{prompt})
	f, ok := s.applyFaults(w, r, req.Model, messages)
	if !ok {
		return
	}
	rep := s.plan(chatRequest{Model: req.Model, Messages: messages, MaxTokens: req.MaxTokens}, resolveConversation(messages, s.cfg.Tokens), f)
	rep.id = strings.Replace(rep.id, "chatcmpl-", "cmpl-", 1)
	if req.Stream {
		s.streamText(w, r, rep, f, req.StreamOptions != nil && req.StreamOptions.IncludeUsage)
		return
	}
	if wait(r.Context(), time.Duration(len(rep.tokens))*s.cfg.TokenInterval, 0, nil) != nil {
		return
	}
	writeJSON(w, http.StatusOK, rep.text(strings.Join(rep.tokens, ""), &rep.finish, &rep.usage))
}

// text is a text_completion of rep with one choice.
func (rep reply) text(text string, finish *string, u *usage) textCompletion {
	return textCompletion{
		ID: rep.id, Object: "text_completion", Created: rep.created, Model: rep.model, SystemFingerprint: systemFingerprint,
		Choices: []textChoice{{Text: text, FinishReason: finish}},
		Usage:   u,
	}
}

// streamText sends rep as server-sent events: one chunk per token, a
// finish chunk, the usage chunk if asked for, and [DONE], shaped by f.
func (s *Server) streamText(w http.ResponseWriter, r *http.Request, rep reply, f faults, includeUsage bool) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	out := &eventWriter{w: w, rc: http.NewResponseController(w), split: f.splitUTF8, commentEvery: s.cfg.CommentInterval}
	defer out.clearDeadline()
	ctx := r.Context()
	send := func(c textCompletion) error {
		b, err := marshal(c)
		if err != nil {
			return err
		}
		return out.write(append(append([]byte("data: "), b...), "\n\n"...))
	}
	for sent := 0; ; sent++ {
		if f.stallFor > 0 && sent == f.stallAfter && out.pause(ctx, f.stallFor) != nil {
			return
		}
		if f.end != endNormal && sent == f.endAfter {
			out.endEarly(f.end, rep.id)
			return
		}
		if sent == len(rep.tokens) {
			break
		}
		if out.pause(ctx, s.cfg.TokenInterval) != nil || send(rep.text(rep.tokens[sent], nil, nil)) != nil {
			return
		}
	}
	if send(rep.text("", &rep.finish, nil)) != nil {
		return
	}
	if includeUsage {
		u := rep.text("", nil, &rep.usage)
		u.Choices = []textChoice{}
		if send(u) != nil {
			return
		}
	}
	if !f.noDone {
		_ = out.write(eventDone)
	}
}

// promptText returns the prompt as one text.
func promptText(raw json.RawMessage) (string, error) {
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return one, nil
	}
	var many []string
	if json.Unmarshal(raw, &many) == nil && len(many) > 0 {
		return strings.Join(many, "\n"), nil
	}
	return "", errors.New("prompt: must be a string or an array of strings.")
}
