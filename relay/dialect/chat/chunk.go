package chat

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/relaydev/relay/relay/wire"
)

// Delta is what one chat.completion.chunk says about choice 0. A Delta may be
// empty: providers send chunks with no choices (Azure's content-filter
// preamble) or an empty delta next to a finish_reason.
//
// Every member of the chunk reaches the Delta, except the ones the relay
// writes itself (id, created, and relay, the extension of a relay called
// as a provider) and obfuscation, the padding OpenAI adds against length
// side channels, which means nothing once the relay cuts its own chunks. Members it does not know are kept raw in the Extra
// fields, to be re-emitted unchanged.
type Delta struct {
	// Role is set on the first chunk of a message, usually "assistant".
	Role string
	// Content is the text fragment. Content sent as an array of parts
	// (Mistral) is flattened to the concatenation of its "text" parts.
	Content string
	// Reasoning is a fragment of the model's reasoning, not of its answer:
	// reasoning_content (DeepSeek, vLLM), reasoning (OpenRouter; used
	// when reasoning_content is absent), or Anthropic's thinking. A
	// continuation never replays it as text.
	Reasoning string
	// ReasoningSignature is Anthropic's signature of the thinking block
	// whose text Reasoning carried (signature_delta): it closes the block,
	// and a client sends it back with the block (Anthropic requires it
	// when thinking precedes tool use).
	ReasoningSignature string
	// RedactedReasoning is the opaque data of an Anthropic
	// redacted_thinking block: reasoning encrypted by the provider, which
	// a client must send back as it came.
	RedactedReasoning string
	// Refusal is a fragment of the model's refusal (delta.refusal).
	Refusal string
	// ToolCalls is the raw tool_calls fragment array, nil when absent, null
	// or empty. Fragments must be merged by index by the consumer.
	ToolCalls json.RawMessage
	// Annotations is the raw delta.annotations array, nil when absent,
	// null or empty.
	Annotations json.RawMessage
	// Citations is an array of Anthropic citation objects (citations_delta)
	// for the text of the block they arrive in, nil when none. Those with
	// a URL also come as url_citation Annotations at the block's end.
	Citations json.RawMessage
	// NewBlock says that the delta's text starts a new text block of an
	// Anthropic answer right after another text block: a citation covers
	// its whole block, so the boundary is kept.
	NewBlock bool
	// Logprobs is the raw choice.logprobs object ({"content": [...],
	// "refusal": [...]}), nil when absent or null.
	Logprobs json.RawMessage
	// FinishReason is set on the chunk that ends the choice ("stop",
	// "length", "tool_calls", "content_filter", ...).
	FinishReason string
	// StopSequence is the stop sequence that ended the answer, when the
	// provider says which (Anthropic's stop_sequence); FinishReason is
	// "stop" then.
	StopSequence string
	// Usage is set on the usage chunk, typically the last one with empty
	// choices when stream_options.include_usage was requested.
	Usage *Usage
	// Model is the model the provider says served the chunk.
	Model string
	// SystemFingerprint is the chunk's system_fingerprint.
	SystemFingerprint string
	// ChunkExtra, ChoiceExtra and DeltaExtra are the unknown members of
	// the chunk, of choice 0 and of its delta, in the order they came.
	ChunkExtra, ChoiceExtra, DeltaExtra []Field
}

// HasContent reports whether d carries part of the answer: text,
// reasoning, a refusal or tool calls.
func (d *Delta) HasContent() bool {
	return d.Content != "" || d.Reasoning != "" || d.Refusal != "" || len(d.ToolCalls) > 0
}

// Usage is the token accounting of a completion, as OpenAI reports it.
type Usage struct {
	PromptTokens            int              `json:"prompt_tokens"`
	CompletionTokens        int              `json:"completion_tokens"`
	TotalTokens             int              `json:"total_tokens"`
	PromptTokensDetails     wire.TokenCounts `json:"prompt_tokens_details"`
	CompletionTokensDetails wire.TokenCounts `json:"completion_tokens_details"`
	// ServerToolUse is wire.Usage.ServerToolUse.
	ServerToolUse wire.TokenCounts `json:"server_tool_use"`
}

// ParseChunk decodes the data of one SSE event of a streaming chat
// completion. Data that is not a JSON object of the chunk's shape yields an
// error wrapping ErrMalformed. An error payload ({"error": ...}, or vLLM's
// {"object": "error", ...}) yields an error wrapping *Error.
//
// A worker calls it for every chunk of every stream, so the common shape
// is read by hand (parseChunkFast); every other chunk, and every error, is
// parseChunkGeneral's.
func ParseChunk(data []byte) (Delta, error) {
	var d Delta
	err := ParseChunkInto(data, &d)
	return d, err
}

// ParseChunkInto is ParseChunk into d, for a Stream, which reads every
// chunk of an answer into the same Delta.
func ParseChunkInto(data []byte, d *Delta) error {
	*d = Delta{}
	if parseChunkFast(data, d) {
		return nil
	}
	return parseGeneralInto(data, d)
}

// parseGeneralInto is parseChunkGeneral into d. The Delta it returns is
// copied in this frame, not in ParseChunkInto's, which is on the stack of
// every chunk's parse (relay/worker/stack.go); hence noinline.
//
//go:noinline
func parseGeneralInto(data []byte, d *Delta) (err error) {
	*d, err = parseChunkGeneral(data)
	return err
}

// parseChunkGeneral is ParseChunk for any data: it is the fallback of the
// fast path and the reference the fast path is fuzzed against.
//
// The data is validated once and then walked member by member (members),
// rather than decoded into structs level by level: a chunk's members the
// relay does not know are kept without a decoder pass per level.
func parseChunkGeneral(data []byte) (Delta, error) {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return Delta{}, fmt.Errorf("%w: chunk is not a JSON object", ErrMalformed)
	}
	if !json.Valid(trimmed) {
		return Delta{}, fmt.Errorf("%w: chunk is not valid JSON", ErrMalformed)
	}
	var (
		d               Delta
		object          string
		choices, errRaw []byte
	)
	err := members(trimmed, func(name, value []byte) (err error) {
		switch string(name) {
		case `"model"`:
			d.Model, err = decodeString(value)
		case `"object"`:
			object, err = decodeString(value)
		case `"system_fingerprint"`:
			d.SystemFingerprint, err = decodeString(value)
		case `"choices"`:
			choices = value
		case `"usage"`:
			if !isNull(value) {
				d.Usage = &Usage{}
				err = json.Unmarshal(value, d.Usage)
			}
		case `"error"`:
			errRaw = value
		case `"id"`, `"created"`, `"obfuscation"`, `"relay"`:
		default:
			var f Field
			f, err = field(name, value)
			d.ChunkExtra = append(d.ChunkExtra, f)
		}
		return err
	})
	if err != nil {
		return Delta{}, fmt.Errorf("%w: chunk: %w", ErrMalformed, err)
	}
	if !isNull(errRaw) {
		var e Error
		if err := json.Unmarshal(errRaw, &e); err != nil {
			return Delta{}, fmt.Errorf("%w: chunk error: %w", ErrMalformed, err)
		}
		return Delta{}, fmt.Errorf("error in stream: %w", &e)
	}
	if object == "error" {
		e, _ := ParseErrorBody(trimmed)
		return Delta{}, fmt.Errorf("error in stream: %w", &e)
	}
	if !isNull(choices) {
		if err := arrayElements(choices, func(c []byte) error { return d.choice(c) }); err != nil {
			return Delta{}, fmt.Errorf("%w: chunk choices: %w", ErrMalformed, err)
		}
	}
	return d, nil
}

// choice fills d from the choice c if it is choice 0.
func (d *Delta) choice(c []byte) error {
	var (
		index         int
		delta, finish []byte
		logprobs      json.RawMessage
		extra         []Field
	)
	err := members(c, func(name, value []byte) (err error) {
		switch string(name) {
		case `"index"`:
			index, err = strconv.Atoi(string(value))
		case `"delta"`:
			delta = value
		case `"finish_reason"`:
			finish = value
		case `"logprobs"`:
			if !isNull(value) {
				logprobs = bytes.Clone(value)
			}
		default:
			var f Field
			f, err = field(name, value)
			extra = append(extra, f)
		}
		return err
	})
	if err != nil || index != 0 {
		return err
	}
	if d.FinishReason, err = decodeString(finish); err != nil {
		return err
	}
	d.Logprobs, d.ChoiceExtra = logprobs, extra
	if isNull(delta) {
		return nil
	}
	return members(delta, d.deltaMember)
}

// deltaMember fills d from one member of choice 0's delta.
func (d *Delta) deltaMember(name, value []byte) (err error) {
	switch string(name) {
	case `"role"`:
		d.Role, err = decodeString(value)
	case `"content"`:
		d.Content, err = decodeContent(value)
	case `"tool_calls"`:
		d.ToolCalls = bytes.Clone(nonEmptyArray(value))
	case `"annotations"`:
		d.Annotations = bytes.Clone(nonEmptyArray(value))
	case `"refusal"`:
		d.Refusal, err = decodeString(value)
	case `"reasoning_content"`, `"reasoning"`:
		r, rerr := decodeString(value)
		if rerr != nil {
			// Not text: some other use of the name, kept as it came.
			return d.deltaExtra(name, value)
		}
		if d.Reasoning == "" || string(name) == `"reasoning_content"` {
			d.Reasoning = r
		}
	default:
		return d.deltaExtra(name, value)
	}
	return err
}

func (d *Delta) deltaExtra(name, value []byte) error {
	f, err := field(name, value)
	d.DeltaExtra = append(d.DeltaExtra, f)
	return err
}

// decodeContent accepts content as a string, null, or an array of typed
// parts of which only "text" parts are kept.
func decodeContent(raw json.RawMessage) (string, error) {
	if isNull(raw) || raw[0] == '"' {
		return decodeString(raw)
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", err
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type == "text" {
			b.WriteString(p.Text)
		}
	}
	return b.String(), nil
}

// nonEmptyArray returns nil for an absent, null or empty array, so callers
// can test len(d.ToolCalls) == 0.
func nonEmptyArray(raw json.RawMessage) json.RawMessage {
	switch string(bytes.TrimSpace(raw)) {
	case "", "null", "[]":
		return nil
	}
	return raw
}
