package mockupstream

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// OpenAI's Responses API, as far as the mock speaks it: POST /v1/responses
// with the same answers, directives and faults as chat completions. The
// input's messages are the conversation; function calls and their outputs
// are accepted and do not decide the answer. Continuations work as for chat
// (README.md): the relay continues on a Responses provider in
// prompt mode.

// responsesRequest holds the request fields the mock looks at.
type responsesRequest struct {
	Model           string          `json:"model"`
	Instructions    string          `json:"instructions"`
	Input           json.RawMessage `json:"input"`
	MaxOutputTokens *int            `json:"max_output_tokens"`
	Stream          bool            `json:"stream"`
}

// chatMessages is the conversation as the answer model reads it:
// instructions as a system message, then the input's messages. input is a
// string (one user message) or an array of items.
func (req responsesRequest) chatMessages() ([]Message, error) {
	var out []Message
	if req.Instructions != "" {
		out = append(out, Message{Role: roleSystem, Content: req.Instructions})
	}
	var s string
	if json.Unmarshal(req.Input, &s) == nil {
		return append(out, Message{Role: roleUser, Content: s}), nil
	}
	var items []struct {
		Type    string          `json:"type"`
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(req.Input, &items); err != nil {
		return nil, errors.New("input: want a string or an array of items")
	}
	for i, it := range items {
		if it.Type != "" && it.Type != "message" {
			continue
		}
		text, err := responsesText(it.Content)
		if err != nil {
			return nil, fmt.Errorf("input[%d].%w", i, err)
		}
		out = append(out, Message{Role: it.Role, Content: text})
	}
	return out, nil
}

// responsesText is the text of a message's content: a string, or its
// input_text and output_text parts.
func responsesText(raw json.RawMessage) (string, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", errors.New("content: want a string or an array of parts")
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type == "input_text" || p.Type == "output_text" {
			b.WriteString(p.Text)
		}
	}
	return b.String(), nil
}

// handleResponses answers POST /v1/responses.
func (s *Server) handleResponses(w http.ResponseWriter, r *http.Request) {
	s.stats.responsesRequest(r)
	w = &statusCounter{ResponseWriter: w, stats: s.stats}
	if !s.authorized(w, r) {
		return
	}
	var req responsesRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBodyBytes)).Decode(&req); err != nil {
		writeResponsesError(w, http.StatusBadRequest, "We could not parse the JSON body of your request: "+err.Error(), "")
		return
	}
	msgs, err := req.chatMessages()
	if err != nil {
		writeResponsesError(w, http.StatusBadRequest, err.Error(), "input")
		return
	}
	rep, f, ok := s.prepare(w, r, turn{dialect: "responses", model: req.Model, messages: msgs, maxTokens: req.MaxOutputTokens, stream: req.Stream}, writeResponsesError)
	if !ok {
		return
	}
	rep.id = fmt.Sprintf("resp_mock_%d", s.ids.Add(1))
	if req.Stream {
		s.streamResponse(w, r, rep, f)
		return
	}
	if wait(r.Context(), time.Duration(len(rep.tokens))*s.cfg.TokenInterval, 0, nil) != nil {
		return
	}
	writeJSON(w, http.StatusOK, responseOf(rep, strings.Join(rep.tokens, ""), true))
}

// responseObject is a response: the non-streamed answer, and the
// "response" of the stream's first and last events.
type responseObject struct {
	ID                string          `json:"id"`
	Object            string          `json:"object"`
	CreatedAt         int64           `json:"created_at"`
	Model             string          `json:"model"`
	Status            string          `json:"status"`
	IncompleteDetails *incomplete     `json:"incomplete_details"`
	Output            []outputMessage `json:"output"`
	Usage             *responsesUsage `json:"usage"`
}

type incomplete struct {
	Reason string `json:"reason"`
}

type outputMessage struct {
	Type    string       `json:"type"`
	ID      string       `json:"id"`
	Role    string       `json:"role"`
	Status  string       `json:"status"`
	Content []outputText `json:"content"`
}

type outputText struct {
	Type        string `json:"type"`
	Text        string `json:"text"`
	Annotations []any  `json:"annotations"`
}

type responsesUsage struct {
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
	TotalTokens  int `json:"total_tokens"`
}

// responseOf is rep as a response, finished (with output and usage) or in
// progress.
func responseOf(rep reply, text string, finished bool) responseObject {
	r := responseObject{ID: rep.id, Object: "response", CreatedAt: rep.created, Model: rep.model, Status: "in_progress", Output: []outputMessage{}}
	if !finished {
		return r
	}
	r.Status = "completed"
	if rep.finish == "length" {
		r.Status, r.IncompleteDetails = "incomplete", &incomplete{Reason: "max_output_tokens"}
	}
	r.Output = append(r.Output, outputMessage{Type: "message", ID: "msg_" + rep.id, Role: roleAssistant, Status: r.Status,
		Content: []outputText{{Type: "output_text", Text: text, Annotations: []any{}}}})
	r.Usage = &responsesUsage{InputTokens: rep.usage.PromptTokens, OutputTokens: rep.usage.CompletionTokens, TotalTokens: rep.usage.TotalTokens}
	return r
}

// streamResponse sends rep as the Responses API's events, numbered by
// sequence_number: response.created, response.in_progress, the output
// message and its text part opened, a response.output_text.delta per
// token, the part and message closed, then response.completed (or
// response.incomplete when max_output_tokens cut the answer).
func (s *Server) streamResponse(w http.ResponseWriter, r *http.Request, rep reply, f faults) {
	out := s.openStream(w, f)
	defer out.clearDeadline()
	type obj = map[string]any
	seq := 0
	emit := func(typ string, fields obj) error {
		fields["type"], fields["sequence_number"] = typ, seq
		seq++
		return out.named(typ, fields)
	}
	itemID := "msg_" + rep.id
	item := outputMessage{Type: "message", ID: itemID, Role: roleAssistant, Status: "in_progress", Content: []outputText{}}
	part := outputText{Type: "output_text", Annotations: []any{}}
	if emit("response.created", obj{"response": responseOf(rep, "", false)}) != nil ||
		emit("response.in_progress", obj{"response": responseOf(rep, "", false)}) != nil ||
		emit("response.output_item.added", obj{"output_index": 0, "item": item}) != nil ||
		emit("response.content_part.added", obj{"item_id": itemID, "output_index": 0, "content_index": 0, "part": part}) != nil ||
		!s.awaitFirstToken(r.Context(), out, f) {
		return
	}
	send := func(tok string) error {
		return emit("response.output_text.delta", obj{"item_id": itemID, "output_index": 0, "content_index": 0, "delta": tok})
	}
	endEarly := func(end ending) {
		switch end {
		case endCut:
			panic(http.ErrAbortHandler)
		case endMalformed:
			_ = out.write([]byte("event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"\n\n"))
		case endError:
			_ = emit("error", obj{"code": "server_error", "message": overloaded, "param": nil})
		}
	}
	if !s.tokens(r, out, rep, f, send, endEarly) {
		return
	}
	final := responseOf(rep, strings.Join(rep.tokens, ""), true)
	part.Text = final.Output[0].Content[0].Text
	last := "response.completed"
	if final.Status == "incomplete" {
		last = "response.incomplete"
	}
	for _, ev := range []struct {
		typ    string
		fields obj
	}{
		{"response.output_text.done", obj{"item_id": itemID, "output_index": 0, "content_index": 0, "text": part.Text}},
		{"response.content_part.done", obj{"item_id": itemID, "output_index": 0, "content_index": 0, "part": part}},
		{"response.output_item.done", obj{"output_index": 0, "item": final.Output[0]}},
		{last, obj{"response": final}},
	} {
		if emit(ev.typ, ev.fields) != nil {
			return
		}
	}
}

// writeResponsesError sends an error in OpenAI's shape, with the type and
// code the real API gives the status.
func writeResponsesError(w http.ResponseWriter, status int, message, param string) {
	e := errorBody(status, message)
	if param != "" {
		e.Param = &param
	}
	if status == http.StatusNotFound {
		e.Code = ptr("model_not_found")
	}
	writeError(w, status, e)
}
