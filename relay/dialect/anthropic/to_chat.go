package anthropic

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/relaydev/relay/relay/dialect/chat"
	"github.com/relaydev/relay/relay/wire"
)

// ChatRequest is a client's Messages request translated for the work
// queue: the generation is a chat completion request, so every provider
// behind the relay serves it and the worker, its retries, continuations
// and takeovers stay as they are.
type ChatRequest struct {
	// Body is the chat completion request.
	Body json.RawMessage
	// Stream is the Messages request's stream.
	Stream bool
}

// ignored are parameters accepted and left unused, because a
// chat-completions upstream has nothing they could mean: top_k (OpenAI
// has no such sampling parameter, and sending it would make OpenAI itself
// refuse the request), thinking (an extended-thinking budget; reasoning
// models reason on their own, and their reasoning still reaches the client
// as thinking blocks), service_tier and container.
var ignored = []string{"top_k", "thinking", "service_tier", "container"}

// ToChat translates a client's Messages request into a chat completion
// request and checks the Messages fields, with their own names in errors.
// model checks the model it names (the caller's catalog and the key's
// rights), before any other field; the chat request's own checks are the
// caller's, whose errors ErrorAsSent names as the client sent them.
func ToChat(body []byte, model func(string) *wire.Error) (ChatRequest, *wire.Error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil || fields == nil {
		return ChatRequest{}, chat.Invalid("", chat.CodeInvalidJSON, "request body must be a JSON object")
	}
	var req ChatRequest
	var name string
	if json.Unmarshal(fields["model"], &name) != nil || name == "" {
		return ChatRequest{}, chat.Invalid("model", chat.CodeInvalidValue, "model: must be a non-empty string")
	}
	if e := model(name); e != nil {
		return ChatRequest{}, e
	}
	if e := chat.CheckText(body, chat.Dotted); e != nil {
		return ChatRequest{}, e
	}
	if raw, ok := fields["max_tokens"]; !ok || isNull(raw) {
		return ChatRequest{}, chat.Invalid("max_tokens", chat.CodeInvalidValue, "max_tokens: field required")
	}
	if raw, ok := fields["stream"]; ok && !isNull(raw) && json.Unmarshal(raw, &req.Stream) != nil {
		return ChatRequest{}, chat.Invalid("stream", chat.CodeInvalidValue, "stream: must be a boolean")
	}
	out := map[string]json.RawMessage{"model": fields["model"], "max_tokens": fields["max_tokens"]}
	if e := chatFields(fields, out); e != nil {
		return ChatRequest{}, e
	}
	messages, e := chatMessages(fields["system"], fields["messages"])
	if e != nil {
		return ChatRequest{}, e
	}
	out["messages"] = marshal(messages)
	req.Body = marshal(out)
	return req, nil
}

// chatFields copies the parameters other than the messages into out,
// translated, and refuses the ones the relay does not know.
func chatFields(fields, out map[string]json.RawMessage) *wire.Error {
	known := map[string]bool{"model": true, "max_tokens": true, "messages": true, "system": true, "stream": true,
		"stop_sequences": true, "temperature": true, "top_p": true, "metadata": true, "tools": true, "tool_choice": true}
	for _, name := range ignored {
		known[name] = true
	}
	for name := range fields {
		if !known[name] {
			return chat.Invalid(name, chat.CodeUnsupportedParameter, "%s: extra inputs are not permitted", name)
		}
	}
	present := func(name string) (json.RawMessage, bool) {
		raw, ok := fields[name]
		return raw, ok && !isNull(raw)
	}
	// Anthropic's temperature ranges from 0 to 1; chat's range (to 2) is
	// checked with the chat request.
	if raw, ok := present("temperature"); ok {
		var t float64
		if json.Unmarshal(raw, &t) != nil || t < 0 || t > 1 {
			return chat.Invalid("temperature", chat.CodeInvalidValue, "temperature: must be a number between 0 and 1")
		}
		out["temperature"] = raw
	}
	if raw, ok := present("top_p"); ok {
		out["top_p"] = raw
	}
	if raw, ok := present("stop_sequences"); ok {
		out["stop"] = raw
	}
	if raw, ok := present("metadata"); ok {
		var m struct {
			UserID *string `json:"user_id"`
		}
		if json.Unmarshal(raw, &m) != nil {
			return chat.Invalid("metadata", chat.CodeInvalidValue, "metadata: must be an object")
		}
		if m.UserID != nil {
			out["user"] = marshal(*m.UserID)
		}
	}
	if raw, ok := present("tools"); ok {
		tools, e := chatTools(raw)
		if e != nil {
			return e
		}
		out["tools"] = tools
	}
	if raw, ok := present("tool_choice"); ok {
		return chatToolChoice(raw, out)
	}
	return nil
}

// chatTools accepts client tools only: Anthropic's server tools (web
// search, code execution, ...) run at Anthropic, which a chat-completions
// upstream does not have.
func chatTools(raw json.RawMessage) (json.RawMessage, *wire.Error) {
	var tools []Tool
	if json.Unmarshal(raw, &tools) != nil {
		return nil, chat.Invalid("tools", chat.CodeInvalidValue, "tools: must be an array of tools")
	}
	out := make([]chat.Tool, len(tools))
	for i, t := range tools {
		if t.Type != "" && t.Type != "custom" {
			return nil, chat.Invalid(fmt.Sprintf("tools.%d.type", i), chat.CodeUnsupportedParameter,
				"tools.%d: tools of type %q are not supported; the relay serves client tools (name, description, input_schema) only", i, t.Type)
		}
		if t.Name == "" {
			return nil, chat.Invalid(fmt.Sprintf("tools.%d.name", i), chat.CodeInvalidValue, "tools.%d.name: field required", i)
		}
		if !isObject(t.InputSchema) {
			return nil, chat.Invalid(fmt.Sprintf("tools.%d.input_schema", i), chat.CodeInvalidValue, "tools.%d.input_schema: must be a JSON schema object", i)
		}
		out[i] = chat.Tool{Type: "function", Function: chat.ToolFunction{Name: t.Name, Description: t.Description, Parameters: t.InputSchema}}
	}
	return marshal(out), nil
}

// chatToolChoice: auto, any (chat's "required"), none, or a tool by name;
// disable_parallel_tool_use is chat's parallel_tool_calls, negated.
func chatToolChoice(raw json.RawMessage, out map[string]json.RawMessage) *wire.Error {
	var c ToolChoice
	if json.Unmarshal(raw, &c) != nil {
		return chat.Invalid("tool_choice", chat.CodeInvalidValue, "tool_choice: must be an object")
	}
	switch c.Type {
	case "auto", "none":
		out["tool_choice"] = marshal(c.Type)
	case "any":
		out["tool_choice"] = marshal("required")
	case "tool":
		if c.Name == "" {
			return chat.Invalid("tool_choice.name", chat.CodeInvalidValue, "tool_choice.name: field required")
		}
		out["tool_choice"] = marshal(map[string]any{"type": "function", "function": map[string]string{"name": c.Name}})
	default:
		return chat.Invalid("tool_choice.type", chat.CodeInvalidValue, "tool_choice.type: must be auto, any, tool or none")
	}
	if c.DisableParallelToolUse != nil && c.Type != "none" {
		out["parallel_tool_calls"] = marshal(!*c.DisableParallelToolUse)
	}
	return nil
}

// ErrorAsSent names the parameter of an error of the chat request ToChat
// made as the client sent it, and returns e.
func ErrorAsSent(e *wire.Error) *wire.Error {
	e.Param = paramAsSent(e.Param)
	e.Message = strings.ReplaceAll(e.Message, "'stop'", "'stop_sequences'")
	return e
}

// paramAsSent names a parameter of the translated chat request as the
// client sent it.
func paramAsSent(param string) string {
	switch {
	case strings.HasPrefix(param, "messages"):
		return "messages"
	case param == "stop":
		return "stop_sequences"
	case param == "user":
		return "metadata.user_id"
	}
	return param
}

// TokenCount is the answer of POST /v1/messages/count_tokens.
type TokenCount struct {
	InputTokens int `json:"input_tokens"`
}

// CountTokensBody is a count_tokens request's body as a Messages
// request's, for ToChat: max_tokens (which it lacks) set, stream (which it
// may not have) refused.
func CountTokensBody(body []byte) ([]byte, *wire.Error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil || fields == nil {
		return nil, chat.Invalid("", chat.CodeInvalidJSON, "request body must be a JSON object")
	}
	if _, ok := fields["stream"]; ok {
		return nil, chat.Invalid("stream", chat.CodeUnsupportedParameter, "stream: extra inputs are not permitted")
	}
	fields["max_tokens"] = json.RawMessage("1")
	return marshal(fields), nil
}
