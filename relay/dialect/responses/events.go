package responses

import (
	"cmp"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/relaydev/relay/relay/dialect/chat"
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

// Stream is what a Renderer needs of a stream besides its frames.
type Stream struct {
	// ID is the stream's id, which the Response's id and its items' ids
	// contain, so that any edge finds the stream they came from.
	ID string
	// Model is the model the client asked for.
	Model string
	// Created is when the stream was created, in Unix seconds.
	Created int64
}

// Renderer renders one stream's frames as Responses events (a stream
// served to a client and its resumes) and builds its Response object as
// it goes (the non-streaming answers). An event is written to a
// chat.EventWriter with no id: a client resumes after a sequence number.
type Renderer struct {
	s Stream
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
	// endFrame is the end frame, once rendered, and failure the error it
	// tells the client.
	started  bool
	endFrame *wire.Frame
	failure  *wire.Error
	// model is the model of the latest chunk: the one answering.
	model string
	// folding is set while deltas are folded (Fold); held is the delta
	// written last, not yet written: the next delta of the same part is
	// added to it.
	folding bool
	held    responseEvent
	// heldDelta is held's delta so far, set in held when it is written.
	heldDelta strings.Builder
}

// NewRenderer renders stream s, writing the events after sequence number
// after (-1: all).
func NewRenderer(s Stream, after int) *Renderer {
	return &Renderer{s: s, after: after, msg: -1, rs: -1, calls: map[int]int{}}
}

// toolCallDelta is a fragment of a chunk's tool_calls array.
type toolCallDelta struct {
	Index    int           `json:"index"`
	ID       string        `json:"id"`
	Type     string        `json:"type"`
	Function chat.Function `json:"function"`
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
	Response Response `json:"response"`
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
// Response is built) or the client has it already. While folding, a delta
// is held until the next event: a delta of the same part is added to it.
func (r *Renderer) emit(out chat.EventWriter, typ string, ev responseEvent) {
	h := ev.head()
	h.Type, h.SequenceNumber = typ, r.next
	r.next++
	if out == nil || h.SequenceNumber <= r.after {
		return
	}
	if r.folding {
		if r.held != nil && r.fold(ev) {
			return
		}
		r.writeHeld(out)
		if d, ok := deltaOf(ev); ok {
			r.held = ev
			r.heldDelta.Reset()
			r.heldDelta.WriteString(*d)
			return
		}
	}
	out.Event("", typ, marshal(ev))
}

// Fold starts folding: until Unfold, the deltas of one part that follow
// each other (text, reasoning, a call's arguments) are written as one,
// numbered as the last of them. A resume with snapshot folds the events
// the client has not seen, so that it gets what was said so far in a few
// events rather than one per token; any event's number is still a point
// to resume after (starting_after), as the events it folds come before it.
func (r *Renderer) Fold() { r.folding = true }

// Unfold writes the delta held, if any, and stops folding.
func (r *Renderer) Unfold(out chat.EventWriter) {
	r.writeHeld(out)
	r.folding = false
}

func (r *Renderer) writeHeld(out chat.EventWriter) {
	if r.held == nil {
		return
	}
	d, _ := deltaOf(r.held)
	*d = r.heldDelta.String()
	out.Event("", r.held.head().Type, marshal(r.held))
	r.held = nil
}

// deltaOf is the delta text of ev, if it is a delta that Fold folds.
func deltaOf(ev responseEvent) (*string, bool) {
	switch e := ev.(type) {
	case *textDeltaEvent:
		return &e.Delta, true
	case *reasoningDeltaEvent:
		return &e.Delta, true
	case *argumentsDeltaEvent:
		return &e.Delta, true
	}
	return nil, false
}

// fold adds delta ev to the held one if both are deltas of the same
// part, and reports whether it did.
func (r *Renderer) fold(ev responseEvent) bool {
	switch h := r.held.(type) {
	case *textDeltaEvent:
		e, ok := ev.(*textDeltaEvent)
		if !ok || e.ItemID != h.ItemID || e.ContentIndex != h.ContentIndex {
			return false
		}
		h.Logprobs = append(h.Logprobs, e.Logprobs...)
	case *reasoningDeltaEvent:
		e, ok := ev.(*reasoningDeltaEvent)
		if !ok || e.ItemID != h.ItemID || e.ContentIndex != h.ContentIndex {
			return false
		}
	case *argumentsDeltaEvent:
		e, ok := ev.(*argumentsDeltaEvent)
		if !ok || e.ItemID != h.ItemID {
			return false
		}
	default:
		return false
	}
	d, _ := deltaOf(ev)
	r.heldDelta.WriteString(*d)
	r.held.head().SequenceNumber = ev.head().SequenceNumber
	return true
}

// Begin renders the events that precede the first frame.
func (r *Renderer) Begin(out chat.EventWriter) {
	for _, typ := range []string{"response.created", "response.in_progress"} {
		resp := r.Response()
		resp.Status = StatusInProgress
		r.emit(out, typ, &lifecycleEvent{Response: resp})
	}
}

// Frame renders a frame other than the end (End renders that one): once
// any frame is stored, a worker's claim included, the response is in
// progress.
func (r *Renderer) Frame(out chat.EventWriter, f wire.Frame) {
	r.started = true
	if f.Kind == wire.KindChunk {
		r.Chunk(out, f)
	}
}

// Cut writes the event that ends a response the edge cannot finish (it
// drains, or lost the log). It is not one of the stream's events: it
// repeats the number of the last event the client has, so that a client
// that resumes after it misses nothing.
func (r *Renderer) Cut(out chat.EventWriter, e *wire.Error) {
	r.Unfold(out)
	out.Event("", "error", marshal(newErrorEvent(max(r.next-1, r.after), e)))
}

// Chunk renders what a chunk frame says.
func (r *Renderer) Chunk(out chat.EventWriter, f wire.Frame) {
	r.model = cmp.Or(f.Model, r.model)
	if f.Reasoning != "" {
		r.closeOpen(out, &r.msg)
		it := r.reasoning(out)
		it.text.WriteString(f.Reasoning)
		r.emit(out, "response.reasoning_text.delta", &reasoningDeltaEvent{ItemID: it.id, OutputIndex: r.rs, Delta: f.Reasoning})
	}
	if f.Content != "" || f.Refusal != "" || len(f.Annotations) > 0 {
		r.closeOpen(out, &r.rs)
		r.messageChunk(out, f) // message.go
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
			it := &outputItem{call: true, id: fmt.Sprintf("fc_%s_%d", r.s.ID, oi), status: StatusInProgress, callID: d.ID, name: d.Function.Name}
			if it.callID == "" {
				it.callID = fmt.Sprintf("call_%s_%d", r.s.ID, oi)
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
func (r *Renderer) closeOpen(out chat.EventWriter, oi *int) {
	if *oi >= 0 {
		r.close(out, *oi, StatusCompleted)
		*oi = -1
	}
}

// reasoning is the open reasoning item, opened (with its reasoning_text
// part) if there is none.
func (r *Renderer) reasoning(out chat.EventWriter) *outputItem {
	if r.rs >= 0 {
		return r.items[r.rs]
	}
	r.rs = len(r.items)
	it := &outputItem{reasoning: true, id: fmt.Sprintf("rs_%s_%d", r.s.ID, r.rs), status: StatusInProgress}
	r.items = append(r.items, it)
	r.emit(out, "response.output_item.added", &itemEvent{OutputIndex: r.rs, Item: it.object(false)})
	r.emit(out, "response.content_part.added", &partEvent{ItemID: it.id, OutputIndex: r.rs, Part: newReasoningText("")})
	return it
}

// close renders the done events of item oi, unless it is done.
func (r *Renderer) close(out chat.EventWriter, oi int, status string) {
	it := r.items[oi]
	if it.status != StatusInProgress {
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

// End renders the end frame f: the open items end, completed only if the
// response is, and the terminal event says how the response ended.
// failure is the error f tells a client of any dialect (the edge's
// reading of the frame's error and status); it is read only when the
// stream did not end done or cancelled.
func (r *Renderer) End(out chat.EventWriter, f wire.Frame, failure *wire.Error) {
	r.started = true
	r.endFrame, r.failure = &f, failure
	status, _, _ := r.status()
	if status != StatusCompleted {
		status = StatusIncomplete
	}
	for oi := range r.items {
		r.close(out, oi, status)
	}
	r.msg, r.rs = -1, -1
	resp := r.Response()
	switch resp.Status {
	case StatusCompleted:
		r.emit(out, "response.completed", &lifecycleEvent{Response: resp})
	case StatusFailed:
		r.emit(out, "error", newErrorEvent(0, failure))
		r.emit(out, "response.failed", &lifecycleEvent{Response: resp})
	default:
		r.emit(out, "response.incomplete", &lifecycleEvent{Response: resp})
	}
}

// Response is the Response as rendered so far.
func (r *Renderer) Response() Response {
	resp := Response{
		ID:                ResponseID(r.s.ID),
		Object:            "response",
		CreatedAt:         r.s.Created,
		Model:             chat.AnsweredBy(r.endFrame, r.model, r.s.Model),
		Output:            make([]any, len(r.items)),
		ParallelToolCalls: true,
		ToolChoice:        "auto",
		Tools:             []any{},
		Metadata:          map[string]string{},
	}
	resp.Relay = chat.RelayOf(resp.Model, r.s.Model)
	for i, it := range r.items {
		resp.Output[i] = it.object(true)
	}
	resp.Status, resp.Error, resp.IncompleteDetails = r.status()
	if r.endFrame != nil {
		resp.Usage = UsageOf(r.endFrame.Usage)
	}
	return resp
}

// status is the Response's status, and its error or why it is incomplete.
// A done stream is incomplete when the provider stopped it (length,
// content_filter); a stream the relay ended incomplete or cancelled is
// incomplete or cancelled with the reason; a failed one has the error.
func (r *Renderer) status() (string, *ResponseError, *IncompleteDetails) {
	switch {
	case r.endFrame == nil && r.started:
		return StatusInProgress, nil, nil
	case r.endFrame == nil:
		return StatusQueued, nil, nil
	}
	f := *r.endFrame
	switch f.Status {
	case wire.StatusDone:
		switch f.FinishReason {
		case "length":
			return StatusIncomplete, nil, &IncompleteDetails{Reason: "max_output_tokens"}
		case "content_filter":
			return StatusIncomplete, nil, &IncompleteDetails{Reason: "content_filter"}
		}
		return StatusCompleted, nil, nil
	case wire.StatusCancelled:
		return StatusCancelled, nil, &IncompleteDetails{Reason: "cancelled"}
	}
	e := r.failure
	rerr := &ResponseError{Code: e.Code, Message: e.Message}
	if f.Status == wire.StatusIncomplete {
		return StatusIncomplete, rerr, &IncompleteDetails{Reason: e.Code}
	}
	return StatusFailed, rerr, nil
}
