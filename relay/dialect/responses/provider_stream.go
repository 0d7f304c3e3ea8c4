package responses

import (
	"cmp"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/relaydev/relay/relay/dialect/chat"
)

// providerEvent is the data of a Responses stream event, every type's
// fields in one struct: the type says which are set.
type providerEvent struct {
	Type        string            `json:"type"`
	Delta       string            `json:"delta"`
	ItemID      string            `json:"item_id"`
	OutputIndex int               `json:"output_index"`
	Item        *providerItem     `json:"item"`
	Response    *providerResponse `json:"response"`
}

type providerItem struct {
	Type      string `json:"type"`
	ID        string `json:"id"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type providerResponse struct {
	Model             string      `json:"model"`
	Status            string      `json:"status"`
	Error             *chat.Error `json:"error"`
	IncompleteDetails *struct {
		Reason string `json:"reason"`
	} `json:"incomplete_details"`
	Usage *Usage `json:"usage"`
}

// Decoder turns the events of a provider's Responses stream into chat
// Deltas: output text into content, reasoning text and summaries into
// Reasoning, function calls into tool_calls fragments indexed in order of
// appearance, and the final response's status and usage into a finish
// reason and usage. It holds one stream's state: a Decoder a stream.
type Decoder struct {
	// tools maps a function_call item's output_index to its tool call.
	tools map[int]*decodedCall
}

// decodedCall is a function call of the stream: its chat tool call index,
// and whether any argument text was sent for it.
type decodedCall struct {
	index   int
	hasArgs bool
}

// NewDecoder returns the Decoder of a new stream.
func NewDecoder() *Decoder {
	return &Decoder{tools: make(map[int]*decodedCall)}
}

// Decode returns the chat.Delta that an event (its type, event, and its
// data) carries, chat.ErrNoDelta for an event that carries nothing, or an
// error of the stream: chat.ErrMalformed for data that is not the
// dialect's, a *chat.Error for the provider's error.
func (d *Decoder) Decode(event string, data []byte) (chat.Delta, error) {
	var e providerEvent
	if err := json.Unmarshal(data, &e); err != nil {
		return chat.Delta{}, fmt.Errorf("%w: %s event: %w", chat.ErrMalformed, event, err)
	}
	switch e.Type {
	case "response.created":
		if e.Response == nil {
			return chat.Delta{}, fmt.Errorf("%w: response.created without a response", chat.ErrMalformed)
		}
		return chat.Delta{Role: "assistant", Model: e.Response.Model}, nil
	case "response.output_text.delta", "response.refusal.delta":
		// A refusal is text the client should read; chat has no other
		// place for it in a chat.Delta.
		return nonEmpty(chat.Delta{Content: e.Delta})
	case "response.reasoning_text.delta", "response.reasoning_summary_text.delta":
		return nonEmpty(chat.Delta{Reasoning: e.Delta})
	case "response.output_item.added":
		if e.Item == nil || e.Item.Type != "function_call" {
			return chat.Delta{}, chat.ErrNoDelta
		}
		t := &decodedCall{index: len(d.tools)}
		d.tools[e.OutputIndex] = t
		return chat.Delta{ToolCalls: chat.ToolFragment(t.index, e.Item.CallID, e.Item.Name, "")}, nil
	case "response.function_call_arguments.delta":
		t := d.tools[e.OutputIndex]
		if t == nil {
			return chat.Delta{}, fmt.Errorf("%w: arguments for output %d, which is no function call", chat.ErrMalformed, e.OutputIndex)
		}
		if e.Delta == "" {
			return chat.Delta{}, chat.ErrNoDelta
		}
		t.hasArgs = true
		return chat.Delta{ToolCalls: chat.ToolFragment(t.index, "", "", e.Delta)}, nil
	case "response.output_item.done":
		// A call whose arguments came whole, without deltas.
		if t := d.tools[e.OutputIndex]; t != nil && !t.hasArgs && e.Item != nil {
			t.hasArgs = true
			return chat.Delta{ToolCalls: chat.ToolFragment(t.index, "", "", cmp.Or(e.Item.Arguments, "{}"))}, nil
		}
		return chat.Delta{}, chat.ErrNoDelta
	case "response.completed", "response.incomplete":
		if e.Response == nil {
			return chat.Delta{}, fmt.Errorf("%w: %s without a response", chat.ErrMalformed, e.Type)
		}
		return d.final(*e.Response), nil
	case "response.failed":
		if e.Response == nil || e.Response.Error == nil {
			return chat.Delta{}, fmt.Errorf("error in stream: %w", &chat.Error{Message: "response failed", Type: "server_error"})
		}
		return chat.Delta{}, fmt.Errorf("error in stream: %w", typed(*e.Response.Error))
	case "error":
		// An error event's fields are an error object's, at the top
		// level; its type is the event's, not the error's.
		var oe chat.Error
		if err := json.Unmarshal(data, &oe); err != nil {
			return chat.Delta{}, fmt.Errorf("%w: error event: %w", chat.ErrMalformed, err)
		}
		oe.Type = ""
		return chat.Delta{}, fmt.Errorf("error in stream: %w", typed(oe))
	}
	return chat.Delta{}, chat.ErrNoDelta
}

// typed gives an error of the Responses API, which has a code and no type,
// the type Classify reads: its "invalid_..." codes (invalid_prompt,
// invalid_image, ...) are the request's fault, anything else the
// provider's.
func typed(e chat.Error) *chat.Error {
	if e.Type == "" && strings.HasPrefix(e.Code, "invalid_") {
		e.Type = "invalid_request_error"
	}
	return &e
}

// final is the finish reason and usage of the response's last event.
func (d *Decoder) final(r providerResponse) chat.Delta {
	out := chat.Delta{FinishReason: "stop", Model: r.Model}
	switch {
	case r.Status == "incomplete" && r.IncompleteDetails != nil && r.IncompleteDetails.Reason == "content_filter":
		out.FinishReason = "content_filter"
	case r.Status == "incomplete":
		out.FinishReason = "length"
	case len(d.tools) > 0:
		out.FinishReason = "tool_calls"
	}
	if u := r.Usage; u != nil {
		out.Usage = &chat.Usage{PromptTokens: u.InputTokens, CompletionTokens: u.OutputTokens, TotalTokens: u.TotalTokens,
			PromptTokensDetails: u.PromptDetails(), CompletionTokensDetails: u.CompletionDetails()}
	}
	return out
}

// nonEmpty skips a chat.Delta of an empty fragment.
func nonEmpty(d chat.Delta) (chat.Delta, error) {
	if d.Content == "" && d.Reasoning == "" {
		return chat.Delta{}, chat.ErrNoDelta
	}
	return d, nil
}
