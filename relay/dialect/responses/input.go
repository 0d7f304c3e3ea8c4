package responses

import (
	"encoding/json"
	"fmt"

	"github.com/relaydev/relay/relay/dialect/chat"
	"github.com/relaydev/relay/relay/wire"
)

// inputItem is an item of a Responses input: a message (with or without
// "type": "message"), a function call the model made, or its output.
type inputItem struct {
	Type      string          `json:"type"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Arguments string          `json:"arguments"`
	Output    json.RawMessage `json:"output"`
}

// inputPart is a content part of an input message.
type inputPart struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	Refusal  string `json:"refusal"`
	ImageURL string `json:"image_url"`
	Detail   string `json:"detail"`
}

// inputRoles maps a Responses role to its chat role. developer becomes
// system: that is what it means to a chat-completions provider, and not
// every one knows the newer name.
var inputRoles = map[string]string{"user": "user", "assistant": "assistant", "system": "system", "developer": "system"}

// translateInput turns instructions and input into chat messages:
// instructions first, as a system message; a string input is one user
// message; consecutive function calls become one assistant message with
// those tool calls, and each call's output a tool message.
func translateInput(input, instructions json.RawMessage) ([]chat.Message, *wire.Error) {
	var messages []chat.Message
	if instructions != nil && !isNull(instructions) {
		if !isString(instructions) {
			return nil, chat.Invalid("instructions", chat.CodeInvalidValue, "'instructions' must be a string")
		}
		messages = append(messages, chat.Message{Role: "system", Content: instructions})
	}
	if input == nil || isNull(input) {
		return nil, chat.Invalid("input", chat.CodeInvalidValue, "missing required parameter: 'input'")
	}
	if isString(input) {
		return append(messages, chat.Message{Role: "user", Content: input}), nil
	}
	var items []json.RawMessage
	if json.Unmarshal(input, &items) != nil || len(items) == 0 {
		return nil, chat.Invalid("input", chat.CodeInvalidValue, "'input' must be a string or a non-empty array of items")
	}
	for i, raw := range items {
		var it inputItem
		if json.Unmarshal(raw, &it) != nil {
			return nil, chat.Invalid(fmt.Sprintf("input[%d]", i), chat.CodeInvalidValue, "input[%d] must be an object", i)
		}
		var e *wire.Error
		switch it.Type {
		case "", "message":
			var m chat.Message
			m, e = translateMessage(it, i)
			messages = append(messages, m)
		case "function_call":
			messages = appendCall(messages, it)
		case "function_call_output":
			var out json.RawMessage
			out, e = callOutput(it, i)
			messages = append(messages, chat.Message{Role: "tool", ToolCallID: it.CallID, Content: out})
		case "reasoning":
			// The model's own reasoning from an earlier turn: a
			// chat-completions provider takes none back.
		default:
			e = chat.Invalid(fmt.Sprintf("input[%d].type", i), chat.CodeUnsupportedParameter, "input items of type %q are not supported", it.Type)
		}
		if e != nil {
			return nil, e
		}
	}
	return messages, nil
}

func translateMessage(it inputItem, i int) (chat.Message, *wire.Error) {
	role, ok := inputRoles[it.Role]
	if !ok {
		return chat.Message{}, chat.Invalid(fmt.Sprintf("input[%d].role", i), chat.CodeInvalidValue,
			"input[%d].role %q is not user, assistant, system or developer", i, it.Role)
	}
	content, e := translateContent(it.Content, fmt.Sprintf("input[%d].content", i))
	return chat.Message{Role: role, Content: content}, e
}

// translateContent keeps a string; an array of parts becomes chat's parts,
// or a string when it is one text part, the form every provider takes.
func translateContent(raw json.RawMessage, param string) (json.RawMessage, *wire.Error) {
	if isString(raw) {
		return raw, nil
	}
	var parts []inputPart
	if json.Unmarshal(raw, &parts) != nil || len(parts) == 0 {
		return nil, chat.Invalid(param, chat.CodeInvalidValue, "%s must be a string or a non-empty array of content parts", param)
	}
	out := make([]chat.Part, len(parts))
	for j, p := range parts {
		switch p.Type {
		case "input_text", "output_text":
			out[j] = chat.Part{Type: "text", Text: p.Text}
		case "refusal":
			out[j] = chat.Part{Type: "text", Text: p.Refusal}
		case "input_image":
			at := fmt.Sprintf("%s[%d].image_url", param, j)
			if p.ImageURL == "" {
				return nil, chat.Invalid(at, chat.CodeUnsupportedParameter, "images are accepted by URL only")
			}
			if !chat.AllowedImageURL(p.ImageURL) {
				return nil, chat.Invalid(at, chat.CodeInvalidValue, "%s must be an https: URL or a data: URL of %s", at, chat.ImageTypesText)
			}
			out[j] = chat.Part{Type: "image_url", ImageURL: &chat.Image{URL: p.ImageURL, Detail: p.Detail}}
		default:
			return nil, chat.Invalid(fmt.Sprintf("%s[%d].type", param, j), chat.CodeUnsupportedParameter, "content parts of type %q are not supported", p.Type)
		}
	}
	if len(out) == 1 && out[0].Type == "text" {
		return marshal(out[0].Text), nil
	}
	return marshal(out), nil
}

// appendCall adds a function call to the assistant message just before
// it (its text, or the calls made with it), or starts one.
func appendCall(messages []chat.Message, it inputItem) []chat.Message {
	call := chat.ToolCall{ID: it.CallID, Type: "function", Function: chat.Function{Name: it.Name, Arguments: it.Arguments}}
	if n := len(messages); n > 0 && messages[n-1].Role == "assistant" {
		messages[n-1].ToolCalls = append(messages[n-1].ToolCalls, call)
		return messages
	}
	return append(messages, chat.Message{Role: "assistant", ToolCalls: []chat.ToolCall{call}})
}

// callOutput is a function call's output as a tool message's content.
func callOutput(it inputItem, i int) (json.RawMessage, *wire.Error) {
	if it.CallID == "" {
		return nil, chat.Invalid(fmt.Sprintf("input[%d].call_id", i), chat.CodeInvalidValue, "input[%d].call_id is required", i)
	}
	return translateContent(it.Output, fmt.Sprintf("input[%d].output", i))
}
