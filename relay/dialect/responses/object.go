package responses

import (
	"encoding/json"
	"strings"

	"github.com/relaydev/relay/relay/dialect/chat"
)

// Response is OpenAI's Response, as POST /v1/responses answers it,
// GET /v1/responses/{id} reads it and the lifecycle events carry it. It is
// built from the stream's frames alone, so every edge renders it the same;
// the request's sampling parameters and tools are not kept with the
// stream, so they are not echoed (null, or the defaults).
type Response struct {
	ID                string             `json:"id"`
	Object            string             `json:"object"`
	CreatedAt         int64              `json:"created_at"`
	Status            string             `json:"status"`
	Error             *ResponseError     `json:"error"`
	IncompleteDetails *IncompleteDetails `json:"incomplete_details"`
	Instructions      *string            `json:"instructions"`
	Model             string             `json:"model"`
	Output            []any              `json:"output"`
	ParallelToolCalls bool               `json:"parallel_tool_calls"`
	Temperature       *float64           `json:"temperature"`
	TopP              *float64           `json:"top_p"`
	ToolChoice        string             `json:"tool_choice"`
	Tools             []any              `json:"tools"`
	Usage             *Usage             `json:"usage"`
	Metadata          map[string]string  `json:"metadata"`
	// Relay names the model the client asked for when another one
	// answered (a fallback); not one of OpenAI's fields.
	Relay *chat.ModelRelay `json:"relay,omitempty"`
}

// Statuses of a Response and of its output items.
const (
	StatusQueued     = "queued"
	StatusInProgress = "in_progress"
	StatusCompleted  = "completed"
	StatusIncomplete = "incomplete"
	StatusFailed     = "failed"
	StatusCancelled  = "cancelled"
)

// ResponseError is the error of a failed Response, or of one cut
// incomplete.
type ResponseError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// IncompleteDetails says why a response is incomplete: OpenAI's
// max_output_tokens and content_filter, the relay's "cancelled", or the
// code of the error that ended a cut answer (retries_exhausted, ...).
type IncompleteDetails struct {
	Reason string `json:"reason"`
}

// outputItem is an item of a Response's output as it is being built: an
// assistant message with one output_text part, a reasoning item with one
// reasoning_text part, or a function call.
type outputItem struct {
	call, reasoning bool
	id              string
	// status is in_progress until the item is done.
	status string
	// text is the message's or the reasoning's text, or the call's
	// arguments, so far.
	text strings.Builder
	// parts are the kinds of the message's content parts, in order
	// (message.go); refusal is its refusal text, annotations
	// and logprobs those of its output_text so far.
	parts        []string
	refusal      strings.Builder
	annotations  []json.RawMessage
	logprobs     []json.RawMessage
	callID, name string
}

// messageItem is OpenAI's output message.
type messageItem struct {
	Type    string `json:"type"`
	ID      string `json:"id"`
	Status  string `json:"status"`
	Role    string `json:"role"`
	Content []any  `json:"content"`
}

// outputText is an output_text content part. Its logprobs are the
// entries of the chunks' logprobs.content arrays, which have the shape of
// the Responses' logprobs, and its annotations the chunks' in the
// Responses' shape (responsesAnnotation); both empty when the provider
// sent none.
type outputText struct {
	Type        string            `json:"type"`
	Text        string            `json:"text"`
	Annotations []json.RawMessage `json:"annotations"`
	Logprobs    []json.RawMessage `json:"logprobs"`
}

func newOutputText(text string, annotations, logprobs []json.RawMessage) outputText {
	return outputText{Type: "output_text", Text: text, Annotations: nonNil(annotations), Logprobs: nonNil(logprobs)}
}

// nonNil renders a missing list as [], as OpenAI sends it.
func nonNil(l []json.RawMessage) []json.RawMessage {
	if l == nil {
		return []json.RawMessage{}
	}
	return l
}

// reasoningItem is OpenAI's reasoning output item, with the model's raw
// reasoning as a reasoning_text part (what OpenAI sends for models whose
// reasoning it shows) and no summary: the providers behind the relay send
// the reasoning itself.
type reasoningItem struct {
	Type    string          `json:"type"`
	ID      string          `json:"id"`
	Summary []any           `json:"summary"`
	Content []reasoningText `json:"content"`
	Status  string          `json:"status"`
}

type reasoningText struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

func newReasoningText(text string) reasoningText {
	return reasoningText{Type: "reasoning_text", Text: text}
}

// functionCallItem is OpenAI's function tool call.
type functionCallItem struct {
	Type      string `json:"type"`
	ID        string `json:"id"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
	Status    string `json:"status"`
}

// object renders the item as it is now; a message's part appears once it
// has text (withPart), as in the events that add it.
func (it *outputItem) object(withPart bool) any {
	if it.call {
		return functionCallItem{Type: "function_call", ID: it.id, CallID: it.callID, Name: it.name, Arguments: it.text.String(), Status: it.status}
	}
	if it.reasoning {
		parts := []reasoningText{}
		if withPart {
			parts = append(parts, newReasoningText(it.text.String()))
		}
		return reasoningItem{Type: "reasoning", ID: it.id, Summary: []any{}, Content: parts, Status: it.status}
	}
	content := []any{}
	if withPart {
		for _, kind := range it.parts {
			content = append(content, it.partObject(kind, true))
		}
	}
	return messageItem{Type: "message", ID: it.id, Status: it.status, Role: "assistant", Content: content}
}
