package responses

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/relaydev/relay/relay/dialect/chat"
	"github.com/relaydev/relay/relay/wire"
)

// Request is a Responses request translated for the work queue: the
// generation is a chat completion request, so every provider behind the
// relay serves it and the worker, its retries, continuations and takeovers
// stay as they are; the stored frames are rendered back as Responses
// events (Renderer).
type Request struct {
	// Chat is the body of the chat completion request, which the caller
	// checks as any other (naming its parameters with ChatParam).
	Chat json.RawMessage
	// Stream and Background are the request's own.
	Stream, Background bool
}

// ignored are parameters accepted and left unused: they tune
// OpenAI's own storage, caching, tracing and tiers, which a
// chat-completions upstream does not have. "store" among them: every
// response is stored in the durable log for the retention anyway.
// "include" is read for one value only: message.output_text.logprobs asks
// for logprobs, as top_logprobs does.
var ignored = []string{"store", "metadata", "truncation", "include", "service_tier",
	"prompt_cache_key", "prompt_cache_retention", "safety_identifier", "stream_options", "reasoning", "max_tool_calls"}

// passed are parameters a chat completion request has under the
// same name and meaning.
var passed = []string{"temperature", "top_p", "parallel_tool_calls", "user"}

// ParseRequest translates a Responses request into a chat completion
// request, checking the Responses fields, with their own names in errors.
// checkModel is the caller's check of the model (served, allowed to the
// key): it runs once the model is read, before the rest is checked, so
// that an unknown model is a 404, as OpenAI answers it, whatever else is
// wrong.
func ParseRequest(body []byte, checkModel func(model string) *wire.Error) (Request, *wire.Error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil || fields == nil {
		return Request{}, chat.Invalid("", chat.CodeInvalidJSON, "request body must be a JSON object")
	}
	var req Request
	var model string
	if json.Unmarshal(fields["model"], &model) != nil || model == "" {
		return Request{}, chat.Invalid("model", chat.CodeInvalidValue, "'model' must be a non-empty string")
	}
	if e := checkModel(model); e != nil {
		return Request{}, e
	}
	if e := chat.CheckText(body, chat.Indexed); e != nil {
		return Request{}, e
	}
	for _, flag := range []struct {
		name string
		v    *bool
	}{{"stream", &req.Stream}, {"background", &req.Background}} {
		if raw, ok := fields[flag.name]; ok && !isNull(raw) && json.Unmarshal(raw, flag.v) != nil {
			return Request{}, chat.Invalid(flag.name, chat.CodeInvalidValue, "'%s' must be a boolean", flag.name)
		}
	}
	chat := map[string]json.RawMessage{"model": fields["model"]}
	if e := translateFields(fields, chat); e != nil {
		return Request{}, e
	}
	messages, e := translateInput(fields["input"], fields["instructions"])
	if e != nil {
		return Request{}, e
	}
	chat["messages"] = marshal(messages)
	req.Chat = marshal(chat)
	return req, nil
}

// marshal encodes what the package builds, which always encodes: its raw
// members come from parsed JSON.
func marshal(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

func isNull(raw json.RawMessage) bool { return string(raw) == "null" }

func isString(raw json.RawMessage) bool {
	var s string
	return json.Unmarshal(raw, &s) == nil
}

// translateFields copies the parameters other than the input into chat,
// translated, and refuses the ones the relay does not know or cannot
// honour.
func translateFields(fields, to map[string]json.RawMessage) *wire.Error {
	known := map[string]bool{"model": true, "input": true, "instructions": true, "stream": true, "background": true,
		"max_output_tokens": true, "tools": true, "tool_choice": true, "text": true, "top_logprobs": true,
		// The edge prepends the conversation it names, and removes it.
		"previous_response_id": true}
	for _, name := range ignored {
		known[name] = true
	}
	for _, name := range passed {
		known[name] = true
		if raw, ok := fields[name]; ok && !isNull(raw) {
			to[name] = raw
		}
	}
	for name := range fields {
		if !known[name] {
			return chat.Invalid(name, chat.CodeUnsupportedParameter, "unknown parameter: '%s'", name)
		}
	}
	if raw, ok := fields["top_logprobs"]; ok && !isNull(raw) && string(raw) != "0" {
		to["logprobs"], to["top_logprobs"] = json.RawMessage("true"), raw
	}
	var include []string
	if json.Unmarshal(fields["include"], &include) == nil && slices.Contains(include, "message.output_text.logprobs") {
		to["logprobs"] = json.RawMessage("true")
	}
	if raw, ok := fields["max_output_tokens"]; ok && !isNull(raw) {
		to["max_tokens"] = raw
	}
	if raw, ok := fields["tools"]; ok && !isNull(raw) {
		tools, e := translateTools(raw)
		if e != nil {
			return e
		}
		to["tools"] = tools
	}
	if raw, ok := fields["tool_choice"]; ok && !isNull(raw) {
		choice, e := translateToolChoice(raw)
		if e != nil {
			return e
		}
		to["tool_choice"] = choice
	}
	if raw, ok := fields["text"]; ok && !isNull(raw) {
		format, e := translateTextFormat(raw)
		if e != nil {
			return e
		}
		if format != nil {
			to["response_format"] = format
		}
	}
	return nil
}

// clientTool is a Responses function tool; chat nests the same fields
// under "function".
type clientTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}

// translateTools accepts function tools only: the built-in tools (web
// search, file search, ...) run at OpenAI, which a chat-completions
// upstream does not have.
func translateTools(raw json.RawMessage) (json.RawMessage, *wire.Error) {
	var tools []clientTool
	if json.Unmarshal(raw, &tools) != nil {
		return nil, chat.Invalid("tools", chat.CodeInvalidValue, "'tools' must be an array of tools")
	}
	out := make([]chat.Tool, len(tools))
	for i, t := range tools {
		if t.Type != "function" {
			return nil, chat.Invalid(fmt.Sprintf("tools[%d].type", i), chat.CodeUnsupportedParameter,
				"tools[%d] is of type %q; the relay serves function tools only", i, t.Type)
		}
		if t.Name == "" {
			return nil, chat.Invalid(fmt.Sprintf("tools[%d].name", i), chat.CodeInvalidValue, "tools[%d].name is required", i)
		}
		out[i] = chat.Tool{Type: "function", Function: chat.ToolFunction{Name: t.Name, Description: t.Description, Parameters: t.Parameters, Strict: t.Strict}}
	}
	return marshal(out), nil
}

// translateToolChoice: "auto", "none" and "required" are the same in
// both; a named function moves under "function".
func translateToolChoice(raw json.RawMessage) (json.RawMessage, *wire.Error) {
	if isString(raw) {
		return raw, nil
	}
	var c struct {
		Type string `json:"type"`
		Name string `json:"name"`
	}
	if json.Unmarshal(raw, &c) != nil || c.Type != "function" || c.Name == "" {
		return nil, chat.Invalid("tool_choice", chat.CodeUnsupportedParameter, "'tool_choice' must be auto, none, required or a function by name")
	}
	return marshal(map[string]any{"type": "function", "function": map[string]string{"name": c.Name}}), nil
}

// translateTextFormat turns text.format into chat's response_format; nil
// for plain text.
func translateTextFormat(raw json.RawMessage) (json.RawMessage, *wire.Error) {
	var text struct {
		Format map[string]json.RawMessage `json:"format"`
	}
	if json.Unmarshal(raw, &text) != nil {
		return nil, chat.Invalid("text", chat.CodeInvalidValue, "'text' must be an object")
	}
	var typ string
	if text.Format != nil && json.Unmarshal(text.Format["type"], &typ) != nil {
		return nil, chat.Invalid("text.format.type", chat.CodeInvalidValue, "'text.format.type' must be a string")
	}
	switch typ {
	case "", "text":
		return nil, nil
	case "json_object":
		return marshal(map[string]string{"type": "json_object"}), nil
	case "json_schema":
		schema := map[string]json.RawMessage{}
		for _, k := range []string{"name", "schema", "strict", "description"} {
			if v, ok := text.Format[k]; ok {
				schema[k] = v
			}
		}
		return marshal(map[string]any{"type": "json_schema", "json_schema": schema}), nil
	}
	return nil, chat.Invalid("text.format.type", chat.CodeUnsupportedParameter, "text format %q is not supported", typ)
}

// ChatParam names a parameter of the translated chat request as the
// client sent it.
func ChatParam(param string) string {
	switch {
	case strings.HasPrefix(param, "messages"):
		return "input"
	case param == "max_tokens":
		return "max_output_tokens"
	case param == "response_format":
		return "text.format"
	}
	return param
}
