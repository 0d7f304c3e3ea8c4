package anthropic

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/relaydev/relay/relay/dialect/chat"
)

// streamEvent is the data of a Messages stream event, every type's fields
// in one struct: the type says which are set.
type streamEvent struct {
	Type    string `json:"type"`
	Message *struct {
		Model string `json:"model"`
		Usage Usage  `json:"usage"`
	} `json:"message"`
	Index        int `json:"index"`
	ContentBlock *struct {
		Type      string          `json:"type"`
		ID        string          `json:"id"`
		Name      string          `json:"name"`
		Text      string          `json:"text"`
		Data      string          `json:"data"`
		Citations json.RawMessage `json:"citations"`
	} `json:"content_block"`
	Delta struct {
		Type         string          `json:"type"`
		Text         string          `json:"text"`
		PartialJSON  string          `json:"partial_json"`
		Thinking     string          `json:"thinking"`
		Signature    string          `json:"signature"`
		Citation     json.RawMessage `json:"citation"`
		StopReason   string          `json:"stop_reason"`
		StopSequence string          `json:"stop_sequence"`
	} `json:"delta"`
	Usage *Usage      `json:"usage"`
	Error *chat.Error `json:"error"`
}

// Decoder turns a provider's Messages stream events into chat Deltas:
// text deltas into content (a text block after a text block marked
// NewBlock), citations into Citations (web ones also into url_citation
// Annotations at the end of their block), thinking into Reasoning and its
// signature into ReasoningSignature, redacted thinking into
// RedactedReasoning, tool_use blocks into tool_calls fragments indexed in
// order of appearance, the stop reason into a finish reason (and the stop
// sequence) and the usage, cache counts included, into chat usage.
type Decoder struct {
	// trimmed is the whitespace cut from the end of the prefill that the
	// continuation has not yet restated.
	trimmed string
	// tools maps the index of a tool_use content block to its tool call
	// index and whether any argument text was sent for it.
	tools map[int]*toolBlock
	// start is the usage message_start reported.
	start Usage
	// last is the type of the latest content block.
	last string
	// runes counts the characters of the call's answer text so far.
	runes int
	// cited is the open text block's web citations.
	cited citedBlock
}

type toolBlock struct {
	index   int
	hasArgs bool
}

// NewDecoder reads the answer of a request FromChat made; trimmed is the
// whitespace it cut from the prefill.
func NewDecoder(trimmed string) *Decoder {
	return &Decoder{trimmed: trimmed, tools: make(map[int]*toolBlock)}
}

// Decode reads the data of one event of type event: the chat.Delta it
// carries, chat.ErrNoDelta for an event that carries nothing (a ping),
// io.EOF for message_stop, an error wrapping chat.ErrMalformed for data
// that is not an event, or one wrapping *chat.Error for the provider's
// error event.
func (d *Decoder) Decode(event string, data []byte) (chat.Delta, error) {
	var e streamEvent
	if err := json.Unmarshal(data, &e); err != nil {
		return chat.Delta{}, fmt.Errorf("%w: %s event: %w", chat.ErrMalformed, event, err)
	}
	switch e.Type {
	case "message_start":
		if e.Message == nil {
			return chat.Delta{}, fmt.Errorf("%w: message_start without a message", chat.ErrMalformed)
		}
		d.start = e.Message.Usage
		return chat.Delta{Role: "assistant", Model: e.Message.Model}, nil
	case "content_block_start":
		return d.blockStart(e)
	case "content_block_delta":
		return d.blockDelta(e)
	case "content_block_stop":
		if t := d.tools[e.Index]; t != nil && !t.hasArgs {
			// A tool without input sends no delta; chat clients parse
			// the arguments as JSON, so they get an empty object.
			return chat.Delta{ToolCalls: chat.ToolFragment(t.index, "", "", "{}")}, nil
		}
		if a := d.cited.annotations(d.runes); a != nil {
			d.cited = citedBlock{}
			return chat.Delta{Annotations: a}, nil
		}
		return chat.Delta{}, chat.ErrNoDelta
	case "message_delta":
		return d.messageDelta(e), nil
	case "message_stop":
		return chat.Delta{}, io.EOF
	case "error":
		if e.Error == nil {
			return chat.Delta{}, fmt.Errorf("%w: error event without an error", chat.ErrMalformed)
		}
		return chat.Delta{}, fmt.Errorf("error in stream: %w", e.Error)
	}
	// ping, and event types newer than this decoder.
	return chat.Delta{}, chat.ErrNoDelta
}

func (d *Decoder) blockStart(e streamEvent) (chat.Delta, error) {
	if e.ContentBlock == nil {
		return chat.Delta{}, fmt.Errorf("%w: content_block_start without a block", chat.ErrMalformed)
	}
	newBlock := d.last == "text"
	d.last = e.ContentBlock.Type
	switch e.ContentBlock.Type {
	case "text":
		d.cited = citedBlock{start: d.runes}
		out, err := d.textDelta(e.ContentBlock.Text)
		var cites []json.RawMessage
		if len(e.ContentBlock.Citations) > 0 {
			if err := json.Unmarshal(e.ContentBlock.Citations, &cites); err != nil {
				return chat.Delta{}, fmt.Errorf("%w: content block citations: %w", chat.ErrMalformed, err)
			}
		}
		for _, c := range cites {
			if err := d.cited.add(c); err != nil {
				return chat.Delta{}, fmt.Errorf("%w: content block citations: %w", chat.ErrMalformed, err)
			}
		}
		if len(cites) > 0 {
			out.Citations = e.ContentBlock.Citations
		}
		if !newBlock && len(out.Citations) == 0 {
			return out, err
		}
		out.NewBlock = newBlock
		return out, nil
	case "redacted_thinking":
		return chat.Delta{RedactedReasoning: e.ContentBlock.Data}, nil
	case "tool_use":
		d.trimmed = ""
		t := &toolBlock{index: len(d.tools)}
		d.tools[e.Index] = t
		return chat.Delta{ToolCalls: chat.ToolFragment(t.index, e.ContentBlock.ID, e.ContentBlock.Name, "")}, nil
	}
	// thinking: its text comes in deltas.
	return chat.Delta{}, chat.ErrNoDelta
}

func (d *Decoder) blockDelta(e streamEvent) (chat.Delta, error) {
	switch e.Delta.Type {
	case "text_delta":
		return d.textDelta(e.Delta.Text)
	case "thinking_delta":
		if e.Delta.Thinking == "" {
			return chat.Delta{}, chat.ErrNoDelta
		}
		return chat.Delta{Reasoning: e.Delta.Thinking}, nil
	case "input_json_delta":
		t := d.tools[e.Index]
		if t == nil {
			return chat.Delta{}, fmt.Errorf("%w: input_json_delta for block %d, which is no tool_use", chat.ErrMalformed, e.Index)
		}
		if e.Delta.PartialJSON == "" {
			return chat.Delta{}, chat.ErrNoDelta
		}
		t.hasArgs = true
		return chat.Delta{ToolCalls: chat.ToolFragment(t.index, "", "", e.Delta.PartialJSON)}, nil
	case "signature_delta":
		if e.Delta.Signature == "" {
			return chat.Delta{}, chat.ErrNoDelta
		}
		return chat.Delta{ReasoningSignature: e.Delta.Signature}, nil
	case "citations_delta":
		if len(e.Delta.Citation) == 0 || string(e.Delta.Citation) == "null" {
			return chat.Delta{}, chat.ErrNoDelta
		}
		if err := d.cited.add(e.Delta.Citation); err != nil {
			return chat.Delta{}, fmt.Errorf("%w: citations_delta: %w", chat.ErrMalformed, err)
		}
		return chat.Delta{Citations: append(append(json.RawMessage{'['}, e.Delta.Citation...), ']')}, nil
	}
	return chat.Delta{}, chat.ErrNoDelta
}

func (d *Decoder) textDelta(s string) (chat.Delta, error) {
	if s = d.text(s); s == "" {
		return chat.Delta{}, chat.ErrNoDelta
	}
	d.runes += utf8.RuneCountInString(s)
	return chat.Delta{Content: s}, nil
}

// text drops, from the start of the answer, the whitespace the prefill
// lost (trimmed), where the model restates it: a continuation of "Hello"
// that starts " world" continues "Hello " with "world". Whitespace the
// model does not restate is kept, so text is never lost, at worst a space
// is doubled.
func (d *Decoder) text(s string) string {
	for s != "" && d.trimmed != "" {
		_, n := utf8.DecodeRuneInString(s)
		if !strings.HasPrefix(d.trimmed, s[:n]) {
			d.trimmed = ""
			break
		}
		s, d.trimmed = s[n:], d.trimmed[n:]
	}
	if s != "" {
		d.trimmed = ""
	}
	return s
}

// messageDelta carries the stop reason, the stop sequence and the final
// usage, whose output_tokens is cumulative; the input and cache counts,
// when the event repeats them, are the same as message_start's.
func (d *Decoder) messageDelta(e streamEvent) chat.Delta {
	out := chat.Delta{FinishReason: finishReason(e.Delta.StopReason), StopSequence: e.Delta.StopSequence}
	if e.Usage != nil {
		u := Usage{
			InputTokens:              max(e.Usage.InputTokens, d.start.InputTokens),
			CacheCreationInputTokens: max(e.Usage.CacheCreationInputTokens, d.start.CacheCreationInputTokens),
			CacheReadInputTokens:     max(e.Usage.CacheReadInputTokens, d.start.CacheReadInputTokens),
		}
		tools := e.Usage.ServerToolUse
		if len(tools) == 0 {
			tools = d.start.ServerToolUse
		}
		prompt := u.Prompt()
		out.Usage = &chat.Usage{PromptTokens: prompt, CompletionTokens: e.Usage.OutputTokens, TotalTokens: prompt + e.Usage.OutputTokens,
			PromptTokensDetails: u.PromptDetails(), ServerToolUse: tools}
	}
	return out
}

// finishReason maps a stop reason to a finish reason. A reason this
// decoder does not know (pause_turn among them: the turn is not over) is
// "length", so an answer that may be unfinished never looks whole.
func finishReason(reason string) string {
	switch reason {
	case "":
		return ""
	case "end_turn", "stop_sequence":
		return "stop"
	case "tool_use":
		return "tool_calls"
	case "refusal":
		return "content_filter"
	}
	return "length"
}
