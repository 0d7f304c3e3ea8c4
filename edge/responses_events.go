package edge

import (
	"cmp"
	"encoding/json"
	"fmt"

	"github.com/relaydev/relay/relay/chunklog"
	"github.com/relaydev/relay/relay/dialect/chat"
	"github.com/relaydev/relay/relay/dialect/responses"
	"github.com/relaydev/relay/relay/wire"
)

// # Responses events
//
// A stream's Responses events are a pure function of its frames, numbered
// from 0 without a gap in the order they are rendered:
//
//	before any frame   response.created, response.in_progress
//	reasoning          output_item.added (a reasoning item) and
//	                   content_part.added at its first text, then
//	                   reasoning_text.delta
//	text               output_item.added (a message) and content_part.added
//	                   at the message's first text, then output_text.delta
//	                   with the chunk's logprobs entries, and
//	                   output_text.annotation.added per annotation
//	a refusal          a refusal part of the message, refusal.delta
//	a tool call        output_item.added (a function_call) at its first delta,
//	                   then function_call_arguments.delta per fragment
//	the end frame      the done events of every open item, in output order,
//	                   then response.completed, response.incomplete, or
//	                   error and response.failed
//
// Text after a tool call or reasoning, and reasoning after text or a tool
// call, open a new item: items keep the order of what the model said. So
// any edge that renders a stream from its first frame numbers every event
// the same, and
// GET /v1/responses/{id}?stream=true&starting_after=N renders the stream
// from its start and writes only the events after N: no sequence number
// is stored anywhere. A takeover or a continuation is invisible here too:
// the worker stores the text that follows the seam, as any chunk.

// responseEvents renders one stream's frames as Responses events (the
// eventDialect of POST /v1/responses and its resumes) and builds its
// Response object as it goes (the non-streaming answers).
type responseEvents struct {
	v view
	// next is the sequence number of the next event. Events numbered up
	// to after are rendered but not written: a resume after them.
	next, after int
	items       []*outputItem
	// msg and rs are the output indexes of the open message and
	// reasoning items; -1 for none.
	msg, rs int
	// calls maps a chat tool call's index to its item's output index.
	calls map[int]int
	// started is set by the first frame, a worker's claim included;
	// endFrame is the end frame, once rendered.
	started  bool
	endFrame *wire.Frame
	// model is the model of the latest chunk: the one answering.
	model string
}

// newResponseEvents renders stream v, writing the events after sequence
// number after (-1: all).
func newResponseEvents(v view, after int) *responseEvents {
	return &responseEvents{v: v, after: after, msg: -1, rs: -1, calls: map[int]int{}}
}

// eventHead is what every Responses event has.
type eventHead struct {
	Type           string `json:"type"`
	SequenceNumber int    `json:"sequence_number"`
}

func (h *eventHead) head() *eventHead { return h }

type responseEvent interface{ head() *eventHead }

type lifecycleEvent struct {
	eventHead
	Response responseObject `json:"response"`
}

type itemEvent struct {
	eventHead
	OutputIndex int `json:"output_index"`
	Item        any `json:"item"`
}

// partEvent's Part is an outputText or a reasoningText.
type partEvent struct {
	eventHead
	ItemID       string `json:"item_id"`
	OutputIndex  int    `json:"output_index"`
	ContentIndex int    `json:"content_index"`
	Part         any    `json:"part"`
}

type textDeltaEvent struct {
	eventHead
	ItemID       string            `json:"item_id"`
	OutputIndex  int               `json:"output_index"`
	ContentIndex int               `json:"content_index"`
	Delta        string            `json:"delta"`
	Logprobs     []json.RawMessage `json:"logprobs"`
}

type textDoneEvent struct {
	eventHead
	ItemID       string            `json:"item_id"`
	OutputIndex  int               `json:"output_index"`
	ContentIndex int               `json:"content_index"`
	Text         string            `json:"text"`
	Logprobs     []json.RawMessage `json:"logprobs"`
}

// reasoningDeltaEvent is a response.reasoning_text.delta; reasoningDoneEvent
// a response.reasoning_text.done.
type reasoningDeltaEvent struct {
	eventHead
	ItemID       string `json:"item_id"`
	OutputIndex  int    `json:"output_index"`
	ContentIndex int    `json:"content_index"`
	Delta        string `json:"delta"`
}

type reasoningDoneEvent struct {
	eventHead
	ItemID       string `json:"item_id"`
	OutputIndex  int    `json:"output_index"`
	ContentIndex int    `json:"content_index"`
	Text         string `json:"text"`
}

type argumentsDeltaEvent struct {
	eventHead
	ItemID      string `json:"item_id"`
	OutputIndex int    `json:"output_index"`
	Delta       string `json:"delta"`
}

type argumentsDoneEvent struct {
	eventHead
	ItemID      string `json:"item_id"`
	OutputIndex int    `json:"output_index"`
	Name        string `json:"name"`
	Arguments   string `json:"arguments"`
}

// errorEvent has the error twice: flat, as OpenAI's SDK types declare it,
// and nested, as OpenAI sends it and as the openai npm client raises it.
type errorEvent struct {
	eventHead
	Code    *string    `json:"code"`
	Message string     `json:"message"`
	Param   *string    `json:"param"`
	Error   chat.Error `json:"error"`
}

func newErrorEvent(seq int, e *wire.Error) *errorEvent {
	ev := &errorEvent{eventHead: eventHead{Type: "error", SequenceNumber: seq}, Message: e.Message, Error: chat.ErrorOf(e)}
	if e.Code != "" {
		ev.Code = &e.Code
	}
	if e.Param != "" {
		ev.Param = &e.Param
	}
	return ev
}

// emit numbers an event and writes it to out, unless out is nil (only the
// Response is built) or the client has it already.
func (r *responseEvents) emit(out *sseWriter, typ string, ev responseEvent) {
	h := ev.head()
	h.Type, h.SequenceNumber = typ, r.next
	r.next++
	if out != nil && h.SequenceNumber > r.after {
		out.typed(typ, marshal(ev))
	}
}

// begin renders the events that precede the first frame.
func (r *responseEvents) begin(out *sseWriter) {
	for _, typ := range []string{"response.created", "response.in_progress"} {
		resp := r.response()
		resp.Status = responseInProgress
		r.emit(out, typ, &lifecycleEvent{Response: resp})
	}
}

// frame renders one frame.
func (r *responseEvents) frame(out *sseWriter, e chunklog.Entry) {
	r.started = true
	switch e.Frame.Kind {
	case wire.KindChunk:
		r.chunk(out, e.Frame)
	case wire.KindEnd:
		r.finish(out, e.Frame)
	}
}

// end follows the terminal event: Responses streams end without [DONE].
func (r *responseEvents) end(*sseWriter) {}

// cut writes the event that ends a response the edge cannot finish (it
// drains, or lost the log). It is not one of the stream's events: it
// repeats the number of the last event the client has, so that a client
// that resumes after it misses nothing.
func (r *responseEvents) cut(out *sseWriter, e *wire.Error) {
	out.typed("error", marshal(newErrorEvent(max(r.next-1, r.after), e)))
}

func (r *responseEvents) chunk(out *sseWriter, f wire.Frame) {
	r.model = cmp.Or(f.Model, r.model)
	if f.Reasoning != "" {
		r.closeOpen(out, &r.msg)
		it := r.reasoning(out)
		it.text.WriteString(f.Reasoning)
		r.emit(out, "response.reasoning_text.delta", &reasoningDeltaEvent{ItemID: it.id, OutputIndex: r.rs, Delta: f.Reasoning})
	}
	if f.Content != "" || f.Refusal != "" || len(f.Annotations) > 0 {
		r.closeOpen(out, &r.rs)
		r.messageChunk(out, f) // responses_message.go
	}
	if len(f.ToolCalls) == 0 {
		return
	}
	var deltas []toolCallDelta
	if json.Unmarshal(f.ToolCalls, &deltas) != nil {
		// The worker stores the array a provider sent; anything else is
		// left out the same way on every edge.
		return
	}
	r.closeOpen(out, &r.msg)
	r.closeOpen(out, &r.rs)
	for _, d := range deltas {
		oi, ok := r.calls[d.Index]
		if !ok {
			oi = len(r.items)
			r.calls[d.Index] = oi
			it := &outputItem{call: true, id: fmt.Sprintf("fc_%s_%d", r.v.id, oi), status: responseInProgress, callID: d.ID, name: d.Function.Name}
			if it.callID == "" {
				it.callID = fmt.Sprintf("call_%s_%d", r.v.id, oi)
			}
			r.items = append(r.items, it)
			r.emit(out, "response.output_item.added", &itemEvent{OutputIndex: oi, Item: it.object(false)})
		} else {
			r.items[oi].name += d.Function.Name
		}
		if d.Function.Arguments != "" {
			it := r.items[oi]
			it.text.WriteString(d.Function.Arguments)
			r.emit(out, "response.function_call_arguments.delta", &argumentsDeltaEvent{ItemID: it.id, OutputIndex: oi, Delta: d.Function.Arguments})
		}
	}
}

// closeOpen completes the open item at *oi, if any, and marks none open.
func (r *responseEvents) closeOpen(out *sseWriter, oi *int) {
	if *oi >= 0 {
		r.close(out, *oi, responseCompleted)
		*oi = -1
	}
}

// reasoning is the open reasoning item, opened (with its reasoning_text
// part) if there is none.
func (r *responseEvents) reasoning(out *sseWriter) *outputItem {
	if r.rs >= 0 {
		return r.items[r.rs]
	}
	r.rs = len(r.items)
	it := &outputItem{reasoning: true, id: fmt.Sprintf("rs_%s_%d", r.v.id, r.rs), status: responseInProgress}
	r.items = append(r.items, it)
	r.emit(out, "response.output_item.added", &itemEvent{OutputIndex: r.rs, Item: it.object(false)})
	r.emit(out, "response.content_part.added", &partEvent{ItemID: it.id, OutputIndex: r.rs, Part: newReasoningText("")})
	return it
}

// close renders the done events of item oi, unless it is done.
func (r *responseEvents) close(out *sseWriter, oi int, status string) {
	it := r.items[oi]
	if it.status != responseInProgress {
		return
	}
	it.status = status
	text := it.text.String()
	switch {
	case it.call:
		r.emit(out, "response.function_call_arguments.done", &argumentsDoneEvent{ItemID: it.id, OutputIndex: oi, Name: it.name, Arguments: text})
	case it.reasoning:
		r.emit(out, "response.reasoning_text.done", &reasoningDoneEvent{ItemID: it.id, OutputIndex: oi, Text: text})
		r.emit(out, "response.content_part.done", &partEvent{ItemID: it.id, OutputIndex: oi, Part: newReasoningText(text)})
	default:
		r.closeParts(out, oi, it)
	}
	r.emit(out, "response.output_item.done", &itemEvent{OutputIndex: oi, Item: it.object(true)})
}

// finish renders the end frame: the open items end, completed only if the
// response is, and the terminal event says how the response ended.
func (r *responseEvents) finish(out *sseWriter, f wire.Frame) {
	r.endFrame = &f
	status, _, _ := r.status()
	if status != responseCompleted {
		status = responseIncomplete
	}
	for oi := range r.items {
		r.close(out, oi, status)
	}
	r.msg, r.rs = -1, -1
	resp := r.response()
	switch resp.Status {
	case responseCompleted:
		r.emit(out, "response.completed", &lifecycleEvent{Response: resp})
	case responseFailed:
		r.emit(out, "error", newErrorEvent(0, endError(f)))
		r.emit(out, "response.failed", &lifecycleEvent{Response: resp})
	default:
		r.emit(out, "response.incomplete", &lifecycleEvent{Response: resp})
	}
}

// response is the Response as rendered so far.
func (r *responseEvents) response() responseObject {
	resp := responseObject{
		ID:                responseID(r.v.id),
		Object:            "response",
		CreatedAt:         r.v.meta.Created,
		Model:             chat.AnsweredBy(r.endFrame, r.model, r.v.meta.Model),
		Output:            make([]any, len(r.items)),
		ParallelToolCalls: true,
		ToolChoice:        "auto",
		Tools:             []any{},
		Metadata:          map[string]string{},
	}
	resp.Relay = chat.RelayOf(resp.Model, r.v.meta.Model)
	for i, it := range r.items {
		resp.Output[i] = it.object(true)
	}
	resp.Status, resp.Error, resp.IncompleteDetails = r.status()
	if r.endFrame != nil {
		resp.Usage = responses.UsageOf(r.endFrame.Usage)
	}
	return resp
}

// status is the Response's status, and its error or why it is incomplete.
// A done stream is incomplete when the provider stopped it (length,
// content_filter); a stream the relay ended incomplete or cancelled is
// incomplete or cancelled with the reason; a failed one has the error.
func (r *responseEvents) status() (string, *responseError, *incompleteDetails) {
	switch {
	case r.endFrame == nil && r.started:
		return responseInProgress, nil, nil
	case r.endFrame == nil:
		return responseQueued, nil, nil
	}
	f := *r.endFrame
	switch f.Status {
	case wire.StatusDone:
		switch reason := finishReason(f); reason {
		case "length":
			return responseIncomplete, nil, &incompleteDetails{Reason: "max_output_tokens"}
		case "content_filter":
			return responseIncomplete, nil, &incompleteDetails{Reason: reason}
		}
		return responseCompleted, nil, nil
	case wire.StatusCancelled:
		return responseCancelled, nil, &incompleteDetails{Reason: "cancelled"}
	}
	e := endError(f)
	rerr := &responseError{Code: e.Code, Message: e.Message}
	if f.Status == wire.StatusIncomplete {
		return responseIncomplete, rerr, &incompleteDetails{Reason: e.Code}
	}
	return responseFailed, rerr, nil
}
