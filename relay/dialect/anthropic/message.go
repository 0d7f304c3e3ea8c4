package anthropic

import (
	"cmp"
	"encoding/json"
	"strings"

	"github.com/relaydev/relay/relay/dialect/chat"
	"github.com/relaydev/relay/relay/wire"
)

// MessageID is the Message id of a stream: any edge finds the stream from
// it.
func MessageID(streamID string) string { return "msg_" + streamID }

// StreamOfMessage is the stream id of a Message id; false when it is not
// one the relay gave out.
func StreamOfMessage(id string) (string, bool) {
	s, ok := strings.CutPrefix(id, "msg_")
	return s, ok && wire.ValidStreamID(s)
}

// Message is Anthropic's Message: the answer of a request without
// "stream", the message of message_start, and a stream's snapshot.
type Message struct {
	ID           string  `json:"id"`
	Type         string  `json:"type"`
	Role         string  `json:"role"`
	Model        string  `json:"model"`
	Content      []any   `json:"content"`
	StopReason   *string `json:"stop_reason"`
	StopSequence *string `json:"stop_sequence"`
	Usage        Usage   `json:"usage"`
	// Error says what cut an answer that ended incomplete or cancelled;
	// its stop_reason is null then. Not one of Anthropic's fields: SDKs
	// keep it as an extra property.
	Error *Error `json:"error,omitempty"`
	// Relay names the model the client asked for when another one
	// answered (a fallback); not one of Anthropic's fields either.
	Relay *chat.ModelRelay `json:"relay,omitempty"`
}

// stopSequence is the stop sequence that ended a done stream, nil when
// none did or the provider did not say which (chat providers say "stop"
// both for the end of a turn and for a stop sequence).
func stopSequence(f wire.Frame) *string {
	if f.StopSequence == "" || finished(f) != "stop" {
		return nil
	}
	return &f.StopSequence
}

// stopReason is Anthropic's stop reason of a done stream's finish reason:
// stop_sequence when the provider said which sequence stopped it, else a
// "stop" reads end_turn.
func stopReason(f wire.Frame) string {
	if stopSequence(f) != nil {
		return "stop_sequence"
	}
	switch finished(f) {
	case "length":
		return "max_tokens"
	case "tool_calls", "function_call":
		return "tool_use"
	case "content_filter":
		return "refusal"
	}
	return "end_turn"
}

// finished is the finish reason of a done end frame: "stop" if the worker
// left it empty, so a finished answer never looks unfinished.
func finished(f wire.Frame) string { return cmp.Or(f.FinishReason, "stop") }

// contentBlock is a content block of the answer as it is being built.
type contentBlock struct {
	// typ is text, thinking, redacted_thinking or tool_use.
	typ string
	// text is the text, the thinking, the redacted data or the tool
	// input.
	text strings.Builder
	// id and name are a tool_use's.
	id, name string
	// signature is a thinking block's, once it came: it closes the block.
	signature string
	// citations are a text block's.
	citations []json.RawMessage
}

type textBlock struct {
	Type      string            `json:"type"`
	Text      string            `json:"text"`
	Citations []json.RawMessage `json:"citations,omitempty"`
}

type thinkingBlock struct {
	Type     string `json:"type"`
	Thinking string `json:"thinking"`
	// Signature is empty in content_block_start, as Anthropic sends it,
	// and stays empty when the reasoning did not come from Anthropic,
	// which alone signs it, or its block was cut before the signature.
	Signature string `json:"signature"`
}

type redactedThinkingBlock struct {
	Type string `json:"type"`
	Data string `json:"data"`
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
		if whole {
			return thinkingBlock{Type: b.typ, Thinking: text, Signature: b.signature}
		}
		return thinkingBlock{Type: b.typ}
	case "redacted_thinking":
		// Its data comes whole, in content_block_start.
		return redactedThinkingBlock{Type: b.typ, Data: b.text.String()}
	case "tool_use":
		input := json.RawMessage("{}")
		// Arguments that are not a JSON object (cut, or a model's
		// mistake) leave the input empty, as Anthropic's SDKs do.
		if whole && isObject(json.RawMessage(text)) {
			input = json.RawMessage(text)
		}
		return toolUseBlock{Type: b.typ, ID: b.id, Name: b.name, Input: input}
	}
	if !whole {
		return textBlock{Type: b.typ}
	}
	return textBlock{Type: b.typ, Text: text, Citations: b.citations}
}
