package chat

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/relaydev/relay/relay/wire"
)

// Answer accumulates a stream's chunks into one message: text, reasoning
// and refusal concatenated, annotations and logprobs entries in order, the
// fingerprint of the last attempt. The chunks' unknown members are not
// kept: they are parts of deltas, with no defined meaning for a whole
// message. Its zero value is an empty answer.
type Answer struct {
	content, reasoning, refusal strings.Builder
	// toolCalls by their index in the deltas.
	toolCalls   map[int]*ToolCall
	annotations []json.RawMessage
	logprobs    []json.RawMessage
	logprobsGap bool
	fingerprint string
	// provider and model generated the last chunk.
	provider, model string
}

// Completion is OpenAI's chat.completion.
type Completion struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	Model   string `json:"model"`
	// SystemFingerprint is the one of the attempt that ended the answer.
	SystemFingerprint string             `json:"system_fingerprint,omitempty"`
	Choices           []CompletionChoice `json:"choices"`
	Usage             *wire.Usage        `json:"usage,omitempty"`
	// Error says what cut an answer that ended incomplete or cancelled.
	Error *Error          `json:"error,omitempty"`
	Relay CompletionRelay `json:"relay"`
}

// CompletionChoice is a Completion's one choice.
type CompletionChoice struct {
	Index   int               `json:"index"`
	Message CompletionMessage `json:"message"`
	// Logprobs has the entries of every chunk, in order (wire.MergeLogprobs).
	Logprobs json.RawMessage `json:"logprobs,omitempty"`
	// FinishReason is null for a cut answer: none of OpenAI's reasons
	// (stop, length, ...) would be true of it.
	FinishReason *string `json:"finish_reason"`
}

// CompletionMessage is the message of a CompletionChoice.
type CompletionMessage struct {
	Role string `json:"role"`
	// Content is null when the answer is only tool calls, as OpenAI sends it.
	Content     *string           `json:"content"`
	Reasoning   string            `json:"reasoning_content,omitempty"`
	Refusal     *string           `json:"refusal,omitempty"`
	ToolCalls   []ToolCall        `json:"tool_calls,omitempty"`
	Annotations []json.RawMessage `json:"annotations,omitempty"`
}

// CompletionRelay is the relay member of a Completion: how the stream
// ended, and who generated its last chunk.
type CompletionRelay struct {
	EndRelay
	Provider string `json:"provider,omitempty"`
	Model    string `json:"model,omitempty"`
	// LogprobsGap says that some chunk's logprobs were dropped
	// (wire.Frame.LogprobsGap).
	LogprobsGap bool `json:"logprobs_gap,omitempty"`
}

// ToolCallDelta is a streamed fragment of a tool call: the call is named by
// index, its arguments split across chunks.
type ToolCallDelta struct {
	Index    int      `json:"index"`
	ID       string   `json:"id"`
	Type     string   `json:"type"`
	Function Function `json:"function"`
}

// Add adds the chunk frame f to the answer. It fails, keeping what it
// added before, on tool calls or annotations that do not decode.
func (a *Answer) Add(f wire.Frame) error {
	a.content.WriteString(f.Content)
	a.reasoning.WriteString(f.Reasoning)
	a.refusal.WriteString(f.Refusal)
	if f.Provider != "" {
		a.provider, a.model = f.Provider, f.Model
	}
	if len(f.Logprobs) > 0 {
		a.logprobs = append(a.logprobs, f.Logprobs)
	}
	a.logprobsGap = a.logprobsGap || f.LogprobsGap
	a.fingerprint = cmp.Or(f.SystemFingerprint, a.fingerprint)
	if len(f.Annotations) > 0 {
		var as []json.RawMessage
		if err := json.Unmarshal(f.Annotations, &as); err != nil {
			return fmt.Errorf("chat: chunk %d: annotations: %w", f.Seq, err)
		}
		a.annotations = append(a.annotations, as...)
	}
	if len(f.ToolCalls) == 0 {
		return nil
	}
	var deltas []ToolCallDelta
	if err := json.Unmarshal(f.ToolCalls, &deltas); err != nil {
		return fmt.Errorf("chat: chunk %d: tool_calls: %w", f.Seq, err)
	}
	if a.toolCalls == nil {
		a.toolCalls = map[int]*ToolCall{}
	}
	for _, d := range deltas {
		tc := a.toolCalls[d.Index]
		if tc == nil {
			tc = &ToolCall{}
			a.toolCalls[d.Index] = tc
		}
		tc.ID = cmp.Or(d.ID, tc.ID)
		tc.Type = cmp.Or(d.Type, tc.Type)
		tc.Function.Name += d.Function.Name
		tc.Function.Arguments += d.Function.Arguments
	}
	return nil
}

// Completion is the answer of stream s as one chat.completion, ended by
// the end frame end, stored at cursor c.
func (a *Answer) Completion(s Stream, c wire.Cursor, end *wire.Frame) Completion {
	msg := CompletionMessage{Role: "assistant", Reasoning: a.reasoning.String(), Annotations: a.annotations}
	if refusal := a.refusal.String(); refusal != "" {
		msg.Refusal = &refusal
	}
	for _, i := range slices.Sorted(maps.Keys(a.toolCalls)) {
		msg.ToolCalls = append(msg.ToolCalls, *a.toolCalls[i])
	}
	if content := a.content.String(); content != "" || len(msg.ToolCalls) == 0 {
		msg.Content = &content
	}
	obj := Completion{
		ID:                s.completionID(),
		Object:            "chat.completion",
		Created:           s.Meta.Created,
		Model:             AnsweredBy(end, a.model, s.Meta.Model),
		SystemFingerprint: a.fingerprint,
		Choices:           []CompletionChoice{{Message: msg, Logprobs: wire.MergeLogprobs(a.logprobs)}},
		Usage:             end.Usage,
		Relay:             CompletionRelay{EndRelay: s.endRelay(c, end), Provider: a.provider, Model: a.model, LogprobsGap: a.logprobsGap},
	}
	if end.Status == wire.StatusDone {
		reason := FinishReason(*end)
		obj.Choices[0].FinishReason = &reason
	} else {
		e := ErrorOf(EndError(*end))
		obj.Error = &e
	}
	return obj
}
