package edge

import (
	"encoding/json"
	"strings"

	"github.com/relaydev/relay/relay/wire"
)

// messageID is the Message id of a stream: any edge finds the stream
// from it (GET /v1/messages/{id}).
func messageID(streamID string) string { return "msg_" + streamID }

// streamOfMessage is the stream id of a Message id; false when it is not
// one the relay gave out.
func streamOfMessage(id string) (string, bool) {
	s, ok := strings.CutPrefix(id, "msg_")
	return s, ok && wire.ValidStreamID(s)
}

// messageObject is Anthropic's Message: the answer of a request without
// "stream", the message of message_start, and what GET /v1/messages/{id}
// answers.
type messageObject struct {
	ID           string       `json:"id"`
	Type         string       `json:"type"`
	Role         string       `json:"role"`
	Model        string       `json:"model"`
	Content      []any        `json:"content"`
	StopReason   *string      `json:"stop_reason"`
	StopSequence *string      `json:"stop_sequence"`
	Usage        messageUsage `json:"usage"`
	// Error says what cut an answer that ended incomplete or cancelled;
	// its stop_reason is null then. Not one of Anthropic's fields: SDKs
	// keep it as an extra property.
	Error *anthropicErrorInner `json:"error,omitempty"`
}

type messageUsage struct {
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
}

func newMessageUsage(u *wire.Usage) messageUsage {
	if u == nil {
		return messageUsage{}
	}
	return messageUsage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens}
}

// stopReason is Anthropic's stop reason of a done stream's finish reason.
// Chat says "stop" both for the end of a turn and for a stop sequence, so
// a stop sequence reads end_turn too.
func stopReason(f wire.Frame) string {
	switch finishReason(f) {
	case "length":
		return "max_tokens"
	case "tool_calls", "function_call":
		return "tool_use"
	case "content_filter":
		return "refusal"
	}
	return "end_turn"
}

// contentBlock is a content block of the answer as it is being built.
type contentBlock struct {
	// typ is text, thinking or tool_use.
	typ  string
	text strings.Builder
	// id and name are a tool_use's.
	id, name string
}

type textBlock struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type thinkingBlock struct {
	Type     string `json:"type"`
	Thinking string `json:"thinking"`
	// Signature is empty: the reasoning did not come from Anthropic,
	// which alone signs it.
	Signature string `json:"signature"`
}

type toolUseBlock struct {
	Type  string          `json:"type"`
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

// object renders the block; whole is false for content_block_start, which
// has the block empty, its content following as deltas.
func (b *contentBlock) object(whole bool) any {
	text := ""
	if whole {
		text = b.text.String()
	}
	switch b.typ {
	case "thinking":
		return thinkingBlock{Type: b.typ, Thinking: text}
	case "tool_use":
		input := json.RawMessage("{}")
		// Arguments that are not a JSON object (cut, or a model's
		// mistake) leave the input empty, as Anthropic's SDKs do.
		if whole && isObject(json.RawMessage(text)) {
			input = json.RawMessage(text)
		}
		return toolUseBlock{Type: b.typ, ID: b.id, Name: b.name, Input: input}
	}
	return textBlock{Type: b.typ, Text: text}
}
