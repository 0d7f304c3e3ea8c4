package uimessage

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/relaydev/relay/relay/dialect/chat"
	"github.com/relaydev/relay/relay/wire"
)

// Request is what useChat's DefaultChatTransport posts that the relay
// reads: the chat's id, its UIMessages, and of the fields of the
// transport's body option the model, a system prompt and a few chat
// completion parameters (passed); an app's other fields are its own and
// are left alone. The trigger and messageId it also sends need nothing:
// for a regenerate, useChat sends the messages up to the one it
// regenerates, so the messages alone say what to answer.
type Request struct {
	ID       string    `json:"id"`
	Messages []Message `json:"messages"`
	Model    string    `json:"model"`
	System   string    `json:"system"`
}

// Message is a UIMessage: a role and its parts.
type Message struct {
	Role  string `json:"role"`
	Parts []Part `json:"parts"`
}

// Part is one part of a UIMessage, with the members of every type the
// relay translates: text and reasoning (Text), file (MediaType, URL,
// Filename), and tool parts ("tool-<name>" and "dynamic-tool": ToolCallID,
// ToolName for a dynamic one, State, Input, Output, ErrorText).
type Part struct {
	Type       string          `json:"type"`
	Text       string          `json:"text"`
	MediaType  string          `json:"mediaType"`
	URL        string          `json:"url"`
	Filename   string          `json:"filename"`
	ToolCallID string          `json:"toolCallId"`
	ToolName   string          `json:"toolName"`
	State      string          `json:"state"`
	Input      json.RawMessage `json:"input"`
	Output     json.RawMessage `json:"output"`
	ErrorText  string          `json:"errorText"`
}

// passed are the chat completion parameters a useChat body may set (with
// the transport's body option, or sendMessage's), copied as they are for
// the chat checks.
var passed = []string{"tools", "tool_choice", "parallel_tool_calls", "temperature", "top_p", "max_tokens",
	"max_completion_tokens", "stop", "seed", "presence_penalty", "frequency_penalty", "reasoning_effort", "user"}

// ChatRequest is a useChat POST translated for the work queue.
type ChatRequest struct {
	// ChatID is the chat's id (the body's id).
	ChatID string
	// Body is the streamed chat completion request.
	Body json.RawMessage
}

// MaxChatID bounds a chat id's length.
const MaxChatID = 255

// ToChat translates useChat's POST body into a chat completion request,
// streamed, of model (or the body's model, which wins); the chat
// request's own checks (the model served, limits, UTF-8) are the caller's.
// Errors name the body's fields as the client sent them
// (messages[1].parts[0].url).
func ToChat(body []byte, model string) (ChatRequest, *wire.Error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil || fields == nil {
		return ChatRequest{}, chat.Invalid("", chat.CodeInvalidJSON, "request body must be a JSON object")
	}
	var req Request
	if err := json.Unmarshal(body, &req); err != nil {
		return ChatRequest{}, chat.Invalid("", chat.CodeInvalidValue, "%s", fieldError(err))
	}
	if e := CheckChatID(req.ID, "id"); e != nil {
		return ChatRequest{}, e
	}
	if req.Model != "" {
		model = req.Model
	}
	if model == "" {
		return ChatRequest{}, chat.Invalid("model", chat.CodeInvalidValue, "model: the body names no model and the relay has no default for chats")
	}
	if len(req.Messages) == 0 {
		return ChatRequest{}, chat.Invalid("messages", chat.CodeInvalidValue, "messages: must hold at least one message")
	}
	var messages []chatMessage
	if req.System != "" {
		messages = append(messages, chatMessage{Role: "system", Content: marshal(req.System)})
	}
	for i, m := range req.Messages {
		ms, e := translate(m, fmt.Sprintf("messages[%d]", i))
		if e != nil {
			return ChatRequest{}, e
		}
		messages = append(messages, ms...)
	}
	if len(messages) == 0 {
		return ChatRequest{}, chat.Invalid("messages", chat.CodeInvalidValue, "messages: none has anything to send to a model")
	}
	out := bytes.NewBufferString(`{"model":`)
	out.Write(marshal(model))
	out.WriteString(`,"stream":true,"messages":`)
	out.Write(marshal(messages))
	for _, name := range passed {
		if raw, ok := fields[name]; ok && !bytes.Equal(raw, []byte("null")) {
			fmt.Fprintf(out, `,%q:%s`, name, raw)
		}
	}
	out.WriteByte('}')
	return ChatRequest{ChatID: req.ID, Body: out.Bytes()}, nil
}

// CheckChatID accepts an id of 1 to MaxChatID printable ASCII characters
// other than '/' (a chat id is a path segment of GET {api}/{id}/stream).
func CheckChatID(id, param string) *wire.Error {
	if id == "" || len(id) > MaxChatID {
		return chat.Invalid(param, chat.CodeInvalidValue, "%s: a chat id of 1 to %d characters is required", param, MaxChatID)
	}
	for i := range len(id) {
		if id[i] <= 0x20 || id[i] > 0x7e || id[i] == '/' {
			return chat.Invalid(param, chat.CodeInvalidValue, "%s: a chat id is printable ASCII without spaces or '/'", param)
		}
	}
	return nil
}

// chatMessage is a chat completion message as ToChat writes it.
type chatMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content,omitempty"`
	ToolCalls  []toolCall      `json:"tool_calls,omitempty"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
}

type toolCall struct {
	ID       string   `json:"id"`
	Type     string   `json:"type"`
	Function function `json:"function"`
}

type function struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// contentPart is a chat content part: text, or an image by URL.
type contentPart struct {
	Type     string    `json:"type"`
	Text     string    `json:"text,omitempty"`
	ImageURL *imageURL `json:"image_url,omitempty"`
}

type imageURL struct {
	URL string `json:"url"`
}

// translate is the chat messages of UIMessage m, at path in the body.
func translate(m Message, path string) ([]chatMessage, *wire.Error) {
	switch m.Role {
	case "system":
		text, e := textOnly(m, path)
		if e != nil {
			return nil, e
		}
		return []chatMessage{{Role: "system", Content: marshal(text)}}, nil
	case "user":
		return userMessage(m, path)
	case "assistant":
		return assistantMessages(m, path)
	}
	return nil, chat.Invalid(path+".role", chat.CodeInvalidValue, "%s.role: must be system, user or assistant", path)
}

// textOnly is the text of a system message, which has text parts only.
func textOnly(m Message, path string) (string, *wire.Error) {
	var b strings.Builder
	for j, p := range m.Parts {
		if p.Type != "text" {
			return "", chat.Invalid(fmt.Sprintf("%s.parts[%d].type", path, j), chat.CodeInvalidValue,
				"%s.parts[%d]: a system message holds text parts only", path, j)
		}
		b.WriteString(p.Text)
	}
	return b.String(), nil
}

// userMessage is a user's UIMessage: its text as the content when it is
// all text in one part, else content parts, files as images (providers
// take no other files in chat completions).
func userMessage(m Message, path string) ([]chatMessage, *wire.Error) {
	var parts []contentPart
	for j, p := range m.Parts {
		at := fmt.Sprintf("%s.parts[%d]", path, j)
		switch {
		case p.Type == "text":
			parts = append(parts, contentPart{Type: "text", Text: p.Text})
		case p.Type == "file":
			if !strings.HasPrefix(p.MediaType, "image/") {
				return nil, chat.Invalid(at+".mediaType", chat.CodeInvalidValue,
					"%s.mediaType: %q files cannot be sent to a chat model; only images (image/*) can", at, p.MediaType)
			}
			if p.URL == "" {
				return nil, chat.Invalid(at+".url", chat.CodeInvalidValue, "%s.url: a file needs its URL (https: or data:)", at)
			}
			parts = append(parts, contentPart{Type: "image_url", ImageURL: &imageURL{URL: p.URL}})
		case ignoredPart(p.Type):
		default:
			return nil, chat.Invalid(at+".type", chat.CodeInvalidValue, "%s.type: %q parts cannot be sent in a user message", at, p.Type)
		}
	}
	if len(parts) == 0 {
		return nil, chat.Invalid(path+".parts", chat.CodeInvalidValue, "%s.parts: a user message needs a text or file part", path)
	}
	if len(parts) == 1 && parts[0].Type == "text" {
		return []chatMessage{{Role: "user", Content: marshal(parts[0].Text)}}, nil
	}
	return []chatMessage{{Role: "user", Content: marshal(parts)}}, nil
}

// ignoredPart reports whether a part of type t carries nothing a model is
// sent: step boundaries, sources the model cited, an app's data parts,
// and reasoning (a model's own reasoning is not sent back to it).
func ignoredPart(t string) bool {
	switch t {
	case "step-start", "source-url", "source-document", "reasoning":
		return true
	}
	return strings.HasPrefix(t, "data-")
}

// assistantMessages is an assistant's UIMessage: one assistant message per
// step (the parts between step-start parts), its tool calls followed by
// their results as tool messages.
func assistantMessages(m Message, path string) ([]chatMessage, *wire.Error) {
	var out []chatMessage
	var step chatMessage
	var text strings.Builder
	var results []chatMessage
	flush := func() {
		if text.Len() > 0 {
			step.Content = marshal(text.String())
		}
		if step.Content != nil || len(step.ToolCalls) > 0 {
			step.Role = "assistant"
			out = append(out, step)
			out = append(out, results...)
		}
		step, results = chatMessage{}, nil
		text.Reset()
	}
	for j, p := range m.Parts {
		at := fmt.Sprintf("%s.parts[%d]", path, j)
		switch {
		case p.Type == "step-start":
			flush()
		case p.Type == "text":
			text.WriteString(p.Text)
		case p.Type == "dynamic-tool" || strings.HasPrefix(p.Type, "tool-"):
			name := strings.TrimPrefix(p.Type, "tool-")
			if p.Type == "dynamic-tool" {
				name = p.ToolName
			}
			call, result, e := toolExchange(p, name, at)
			if e != nil {
				return nil, e
			}
			step.ToolCalls = append(step.ToolCalls, call)
			results = append(results, result)
		case ignoredPart(p.Type), p.Type == "file":
			// A file an assistant generated is not sent back to a chat model.
		default:
			return nil, chat.Invalid(at+".type", chat.CodeInvalidValue, "%s.type: %q parts cannot be sent in an assistant message", at, p.Type)
		}
	}
	flush()
	return out, nil
}

// toolExchange is a tool part as a chat tool call and its result: only a
// call with an output (or an error) can be sent, as a provider refuses a
// tool call without its result.
func toolExchange(p Part, name, at string) (toolCall, chatMessage, *wire.Error) {
	if name == "" || p.ToolCallID == "" {
		return toolCall{}, chatMessage{}, chat.Invalid(at, chat.CodeInvalidValue, "%s: a tool part needs its tool's name and toolCallId", at)
	}
	var result string
	switch p.State {
	case "output-available":
		result = string(p.Output)
		var s string
		if json.Unmarshal(p.Output, &s) == nil {
			result = s
		}
	case "output-error":
		result = p.ErrorText
	default:
		return toolCall{}, chatMessage{}, chat.Invalid(at+".state", chat.CodeInvalidValue,
			"%s.state: tool call %s is %q; only a call with its output (output-available, output-error) can be sent", at, p.ToolCallID, p.State)
	}
	args := "{}"
	if len(p.Input) > 0 && string(p.Input) != "null" {
		args = string(p.Input)
	}
	call := toolCall{ID: p.ToolCallID, Type: "function", Function: function{Name: name, Arguments: args}}
	return call, chatMessage{Role: "tool", ToolCallID: p.ToolCallID, Content: marshal(result)}, nil
}

// fieldError says which field of the body has the wrong type.
func fieldError(err error) string {
	if te, ok := err.(*json.UnmarshalTypeError); ok && te.Field != "" {
		return fmt.Sprintf("%s: must be a %s", te.Field, jsonType(te.Type.Kind().String()))
	}
	return "request body: " + err.Error()
}

// jsonType names a Go kind as JSON does.
func jsonType(kind string) string {
	switch kind {
	case "slice":
		return "array"
	case "struct", "map":
		return "object"
	}
	return kind
}

// marshal renders a value ToChat built; none can fail to encode.
func marshal(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic("uimessage: encode: " + err.Error())
	}
	return b
}
