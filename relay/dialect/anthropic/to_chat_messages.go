package anthropic

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/relaydev/relay/relay/dialect/chat"
	"github.com/relaydev/relay/relay/wire"
)

// # Anthropic messages as chat messages
//
//	system (string or text blocks)   a system message, first
//	user: text, image blocks         a user message (a string when it is text only;
//	                                 images as image_url parts, base64 as data: URLs;
//	                                 https: and image data only)
//	user: tool_result blocks         a tool message each, before the user's other
//	                                 content (chat wants them right after the calls)
//	assistant: text, tool_use        an assistant message with its text and tool_calls;
//	                                 thinking blocks are left out (a chat-completions
//	                                 provider takes no reasoning back)
//
// A final assistant message is a prefill: Anthropic's model continues it,
// and its answer does not repeat it. It stays the last chat message, which
// is how the relay's own continuations ask a provider to go on (prefill
// mode): a provider that extends a final assistant message answers with
// the rest only. One that does not (OpenAI's own API) answers afresh.

// inputMessage is a message of a client's request, its content read
// block by block (parseBlocks), so that an error names the message.
type inputMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// chatMessages turns system and messages into chat messages.
func chatMessages(system, raw json.RawMessage) ([]chat.Message, *wire.Error) {
	var out []chat.Message
	if system != nil && !isNull(system) {
		text, e := blocksText(system, "system")
		if e != nil {
			return nil, e
		}
		out = append(out, chat.Message{Role: "system", Content: marshal(text)})
	}
	if raw == nil || isNull(raw) {
		return nil, chat.Invalid("messages", chat.CodeInvalidValue, "messages: field required")
	}
	var messages []inputMessage
	if json.Unmarshal(raw, &messages) != nil || len(messages) == 0 {
		return nil, chat.Invalid("messages", chat.CodeInvalidValue, "messages: must be a non-empty array of messages")
	}
	for i, m := range messages {
		param := fmt.Sprintf("messages.%d.content", i)
		if m.Content == nil || isNull(m.Content) {
			return nil, chat.Invalid(param, chat.CodeInvalidValue, "%s: field required", param)
		}
		var e *wire.Error
		switch m.Role {
		case "user":
			out, e = appendUser(out, m.Content, param)
		case "assistant":
			out, e = appendAssistant(out, m.Content, param)
		default:
			e = chat.Invalid(fmt.Sprintf("messages.%d.role", i), chat.CodeInvalidValue, "messages.%d.role: must be user or assistant, not %q", i, m.Role)
		}
		if e != nil {
			return nil, e
		}
	}
	return out, nil
}

// parseBlocks parses content: a string is one text block.
func parseBlocks(raw json.RawMessage, param string) ([]Block, *wire.Error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []Block{{Type: "text", Text: s}}, nil
	}
	var bs []Block
	if json.Unmarshal(raw, &bs) != nil {
		return nil, chat.Invalid(param, chat.CodeInvalidValue, "%s: must be a string or an array of content blocks", param)
	}
	return bs, nil
}

// blocksText is the text of content that may hold text blocks only.
func blocksText(raw json.RawMessage, param string) (string, *wire.Error) {
	bs, e := parseBlocks(raw, param)
	if e != nil {
		return "", e
	}
	var text strings.Builder
	for j, b := range bs {
		if b.Type != "text" {
			return "", chat.Invalid(fmt.Sprintf("%s.%d.type", param, j), chat.CodeUnsupportedParameter,
				"%s.%d: only text blocks are supported here, not %q", param, j, b.Type)
		}
		text.WriteString(b.Text)
	}
	return text.String(), nil
}

// appendUser appends a user message's tool results, then its text and
// images.
func appendUser(out []chat.Message, raw json.RawMessage, param string) ([]chat.Message, *wire.Error) {
	bs, e := parseBlocks(raw, param)
	if e != nil {
		return nil, e
	}
	var parts []chat.Part
	textOnly := true
	for j, b := range bs {
		at := fmt.Sprintf("%s.%d", param, j)
		switch b.Type {
		case "text":
			parts = append(parts, chat.Part{Type: "text", Text: b.Text})
		case "image":
			url, e := imageURL(b.Source, at)
			if e != nil {
				return nil, e
			}
			parts = append(parts, chat.Part{Type: "image_url", ImageURL: &chat.Image{URL: url}})
			textOnly = false
		case "tool_result":
			if b.ToolUseID == "" {
				return nil, chat.Invalid(at+".tool_use_id", chat.CodeInvalidValue, "%s.tool_use_id: field required", at)
			}
			text := ""
			if b.Content != nil && !isNull(b.Content) {
				if text, e = blocksText(b.Content, at+".content"); e != nil {
					return nil, e
				}
			}
			out = append(out, chat.Message{Role: "tool", ToolCallID: b.ToolUseID, Content: marshal(text)})
		default:
			return nil, chat.Invalid(at+".type", chat.CodeUnsupportedParameter, "%s: content blocks of type %q are not supported in a user message", at, b.Type)
		}
	}
	switch {
	case len(parts) == 0:
		return out, nil
	case textOnly:
		var text strings.Builder
		for _, p := range parts {
			text.WriteString(p.Text)
		}
		return append(out, chat.Message{Role: "user", Content: marshal(text.String())}), nil
	}
	return append(out, chat.Message{Role: "user", Content: marshal(parts)}), nil
}

// imageURL is an image source as a chat image_url: base64 data of one of
// chat.ImageTypesText becomes a data: URL; a url must be one
// chat.AllowedImageURL accepts.
func imageURL(src *ImageSource, at string) (string, *wire.Error) {
	switch {
	case src == nil:
		return "", chat.Invalid(at+".source", chat.CodeInvalidValue, "%s.source: field required", at)
	case src.Type == "base64" && src.MediaType != "" && src.Data != "":
		if !chat.IsImageType(src.MediaType) {
			return "", chat.Invalid(at+".source.media_type", chat.CodeInvalidValue, "%s.source.media_type: must be %s", at, chat.ImageTypesText)
		}
		return "data:" + src.MediaType + ";base64," + src.Data, nil
	case src.Type == "url" && src.URL != "":
		if !chat.AllowedImageURL(src.URL) {
			return "", chat.Invalid(at+".source.url", chat.CodeInvalidValue, "%s.source.url: must be an https: URL or a data: URL of %s", at, chat.ImageTypesText)
		}
		return src.URL, nil
	}
	return "", chat.Invalid(at+".source", chat.CodeInvalidValue, "%s.source: must be base64 (media_type, data) or url", at)
}

// appendAssistant appends an assistant message: its text and its tool
// calls; thinking blocks are left out.
func appendAssistant(out []chat.Message, raw json.RawMessage, param string) ([]chat.Message, *wire.Error) {
	bs, e := parseBlocks(raw, param)
	if e != nil {
		return nil, e
	}
	var text strings.Builder
	var calls []chat.ToolCall
	for j, b := range bs {
		at := fmt.Sprintf("%s.%d", param, j)
		switch b.Type {
		case "text":
			text.WriteString(b.Text)
		case "tool_use":
			if b.ID == "" || b.Name == "" {
				return nil, chat.Invalid(at, chat.CodeInvalidValue, "%s: a tool_use block needs an id and a name", at)
			}
			args := "{}"
			if b.Input != nil && !isNull(b.Input) {
				if !isObject(b.Input) {
					return nil, chat.Invalid(at+".input", chat.CodeInvalidValue, "%s.input: must be an object", at)
				}
				args = string(b.Input)
			}
			calls = append(calls, chat.ToolCall{ID: b.ID, Type: "function", Function: chat.Function{Name: b.Name, Arguments: args}})
		case "thinking", "redacted_thinking":
		default:
			return nil, chat.Invalid(at+".type", chat.CodeUnsupportedParameter, "%s: content blocks of type %q are not supported in an assistant message", at, b.Type)
		}
	}
	m := chat.Message{Role: "assistant", ToolCalls: calls, Content: json.RawMessage("null")}
	if text.Len() > 0 || len(calls) == 0 {
		m.Content = marshal(text.String())
	}
	return append(out, m), nil
}
