package edge

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/relaydev/relay/relay/dialect/chat"
	"github.com/relaydev/relay/relay/wire"
)

// messagesRequest is a POST /v1/messages (Anthropic's Messages API)
// translated for the work queue: the generation is a chat completion
// request (chat), so every provider behind the relay serves it and the
// worker, its retries, continuations and takeovers stay as they are; the
// edge renders the stored frames as Anthropic's events
// (messages_events.go).
type messagesRequest struct {
	chat   chatRequest
	stream bool
}

// readMessagesRequest reads and translates a request body of at most max
// bytes.
func readMessagesRequest(w http.ResponseWriter, r *http.Request, max int64, lim limits) (messagesRequest, *wire.Error) {
	body, e := readBody(w, r, max)
	if e != nil {
		return messagesRequest{}, e
	}
	return parseMessagesRequest(body, lim)
}

// messagesIgnored are parameters accepted and left unused, because a
// chat-completions upstream has nothing they could mean: top_k (OpenAI
// has no such sampling parameter, and sending it would make OpenAI itself
// refuse the request), thinking (an extended-thinking budget; reasoning
// models reason on their own, and their reasoning still reaches the client
// as thinking blocks), service_tier and container.
var messagesIgnored = []string{"top_k", "thinking", "service_tier", "container"}

// parseMessagesRequest translates a Messages request into a chat
// completion request and validates both: the Messages fields here, with
// their own names in errors, the rest by parseChatRequest, as for any
// chat completion. An unknown model is a 404 (not_found_error).
func parseMessagesRequest(body []byte, lim limits) (messagesRequest, *wire.Error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil || fields == nil {
		return messagesRequest{}, invalid("", CodeInvalidJSON, "request body must be a JSON object")
	}
	var req messagesRequest
	var model string
	if json.Unmarshal(fields["model"], &model) != nil || model == "" {
		return messagesRequest{}, invalid("model", CodeInvalidValue, "model: must be a non-empty string")
	}
	if !lim.served(model) || lim.allowed != nil && !lim.allowed(model) {
		return messagesRequest{}, modelNotFound(model)
	}
	if raw, ok := fields["max_tokens"]; !ok || isNull(raw) {
		return messagesRequest{}, invalid("max_tokens", CodeInvalidValue, "max_tokens: field required")
	}
	if raw, ok := fields["stream"]; ok && !isNull(raw) && json.Unmarshal(raw, &req.stream) != nil {
		return messagesRequest{}, invalid("stream", CodeInvalidValue, "stream: must be a boolean")
	}
	chat := map[string]json.RawMessage{"model": fields["model"], "max_tokens": fields["max_tokens"]}
	if e := translateMessagesFields(fields, chat); e != nil {
		return messagesRequest{}, e
	}
	messages, e := translateMessages(fields["system"], fields["messages"])
	if e != nil {
		return messagesRequest{}, e
	}
	chat["messages"] = marshal(messages)
	creq, e := parseChatRequest(marshal(chat), lim)
	if e != nil {
		e.Param = messagesParam(e.Param)
		e.Message = strings.ReplaceAll(e.Message, "'stop'", "'stop_sequences'")
		return messagesRequest{}, e
	}
	req.chat = creq
	return req, nil
}

// translateMessagesFields copies the parameters other than the messages
// into chat, translated, and refuses the ones the relay does not know.
func translateMessagesFields(fields, chat map[string]json.RawMessage) *wire.Error {
	known := map[string]bool{"model": true, "max_tokens": true, "messages": true, "system": true, "stream": true,
		"stop_sequences": true, "temperature": true, "top_p": true, "metadata": true, "tools": true, "tool_choice": true}
	for _, name := range messagesIgnored {
		known[name] = true
	}
	for name := range fields {
		if !known[name] {
			return invalid(name, CodeUnsupportedParameter, "%s: extra inputs are not permitted", name)
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
			return invalid("temperature", CodeInvalidValue, "temperature: must be a number between 0 and 1")
		}
		chat["temperature"] = raw
	}
	if raw, ok := present("top_p"); ok {
		chat["top_p"] = raw
	}
	if raw, ok := present("stop_sequences"); ok {
		chat["stop"] = raw
	}
	if raw, ok := present("metadata"); ok {
		var m struct {
			UserID *string `json:"user_id"`
		}
		if json.Unmarshal(raw, &m) != nil {
			return invalid("metadata", CodeInvalidValue, "metadata: must be an object")
		}
		if m.UserID != nil {
			chat["user"] = marshal(*m.UserID)
		}
	}
	if raw, ok := present("tools"); ok {
		tools, e := translateMessagesTools(raw)
		if e != nil {
			return e
		}
		chat["tools"] = tools
	}
	if raw, ok := present("tool_choice"); ok {
		return translateMessagesToolChoice(raw, chat)
	}
	return nil
}

// messagesTool is a client tool of the Messages API: its input schema is
// a chat function's parameters.
type messagesTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// translateMessagesTools accepts client tools only: Anthropic's server
// tools (web search, code execution, ...) run at Anthropic, which a
// chat-completions upstream does not have.
func translateMessagesTools(raw json.RawMessage) (json.RawMessage, *wire.Error) {
	var tools []messagesTool
	if json.Unmarshal(raw, &tools) != nil {
		return nil, invalid("tools", CodeInvalidValue, "tools: must be an array of tools")
	}
	out := make([]chat.Tool, len(tools))
	for i, t := range tools {
		if t.Type != "" && t.Type != "custom" {
			return nil, invalid(fmt.Sprintf("tools.%d.type", i), CodeUnsupportedParameter,
				"tools.%d: tools of type %q are not supported; the relay serves client tools (name, description, input_schema) only", i, t.Type)
		}
		if t.Name == "" {
			return nil, invalid(fmt.Sprintf("tools.%d.name", i), CodeInvalidValue, "tools.%d.name: field required", i)
		}
		if !isObject(t.InputSchema) {
			return nil, invalid(fmt.Sprintf("tools.%d.input_schema", i), CodeInvalidValue, "tools.%d.input_schema: must be a JSON schema object", i)
		}
		out[i] = chat.Tool{Type: "function", Function: chat.ToolFunction{Name: t.Name, Description: t.Description, Parameters: t.InputSchema}}
	}
	return marshal(out), nil
}

// translateMessagesToolChoice: auto, any (chat's "required"), none, or a
// tool by name; disable_parallel_tool_use is chat's parallel_tool_calls,
// negated.
func translateMessagesToolChoice(raw json.RawMessage, chat map[string]json.RawMessage) *wire.Error {
	var c struct {
		Type                   string `json:"type"`
		Name                   string `json:"name"`
		DisableParallelToolUse *bool  `json:"disable_parallel_tool_use"`
	}
	if json.Unmarshal(raw, &c) != nil {
		return invalid("tool_choice", CodeInvalidValue, "tool_choice: must be an object")
	}
	switch c.Type {
	case "auto", "none":
		chat["tool_choice"] = marshal(c.Type)
	case "any":
		chat["tool_choice"] = marshal("required")
	case "tool":
		if c.Name == "" {
			return invalid("tool_choice.name", CodeInvalidValue, "tool_choice.name: field required")
		}
		chat["tool_choice"] = marshal(map[string]any{"type": "function", "function": map[string]string{"name": c.Name}})
	default:
		return invalid("tool_choice.type", CodeInvalidValue, "tool_choice.type: must be auto, any, tool or none")
	}
	if c.DisableParallelToolUse != nil && c.Type != "none" {
		chat["parallel_tool_calls"] = marshal(!*c.DisableParallelToolUse)
	}
	return nil
}

// messagesParam names a parameter of the translated chat request as the
// client sent it.
func messagesParam(param string) string {
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
