package edge

import (
	"cmp"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/relaydev/relay/relay/chunklog"
	"github.com/relaydev/relay/relay/dialect/anthropic"
	"github.com/relaydev/relay/relay/dialect/chat"
	"github.com/relaydev/relay/relay/wire"
)

// # Messages events
//
// A stream's Anthropic events are a pure function of its frames, numbered
// from 0 without a gap in the order they are rendered; each event's SSE id
// is its number:
//
//	before any frame   message_start (the message, empty)
//	reasoning          content_block_start (thinking) at its first text, then
//	                   content_block_delta (thinking_delta)
//	its signature      signature_delta, which closes the thinking block: the
//	                   reasoning after it is a new block
//	redacted thinking  content_block_start (redacted_thinking, with its data)
//	citations          citations_delta on the text block, before its text
//	text               content_block_start (text), then text_delta; a chunk
//	                   marked new_block starts a new text block
//	a tool call        content_block_start (tool_use) at its first delta, then
//	                   input_json_delta per fragment of its arguments
//	the end frame      done: content_block_stop of the open block, message_delta
//	                   (stop_reason, usage), message_stop; otherwise an error
//	                   event and no message_stop, so that no client takes a
//	                   cut answer for a finished one
//
// A block of another type closes the open one (content_block_stop), as
// Anthropic sends them one after the other. A seam closes an open
// thinking block: the next attempt thinks anew, and the signature it
// sends signs its own thinking only, so the block cut at the seam stays
// unsigned (signature ""). So any edge that renders a
// stream from its first frame numbers every event the same, and a resume
// (GET /v1/messages/{id} with Last-Event-ID: N) renders the stream from
// its start and writes only the events after N. A takeover or a
// continuation is invisible here too: the worker stores the text that
// follows the seam, as any chunk. Pings (keepalives) and the error that
// ends a response the edge cannot finish have no id: they are not the
// stream's.

// messageEvents renders one stream's frames as Anthropic events (the
// eventDialect of POST /v1/messages and its resumes) and builds its
// Message as it goes (the non-streaming answers).
type messageEvents struct {
	v view
	// next is the number of the next event. Events numbered up to after
	// are rendered but not written: a resume after them.
	next, after int
	blocks      []*contentBlock
	// open is the index of the open block; -1 for none.
	open int
	// calls maps a chat tool call's index to its block's index.
	calls map[int]int
	// endFrame is the end frame, once rendered.
	endFrame *wire.Frame
	// model is the model of the latest chunk: the one answering.
	model string
}

// newMessageEvents renders stream v, writing the events after number
// after (-1: all).
func newMessageEvents(v view, after int) *messageEvents {
	return &messageEvents{v: v, after: after, open: -1, calls: map[int]int{}}
}

type messageStartEvent struct {
	Type    string        `json:"type"`
	Message messageObject `json:"message"`
}

type blockStartEvent struct {
	Type         string `json:"type"`
	Index        int    `json:"index"`
	ContentBlock any    `json:"content_block"`
}

type blockDeltaEvent struct {
	Type  string `json:"type"`
	Index int    `json:"index"`
	Delta any    `json:"delta"`
}

type textDelta struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type thinkingDelta struct {
	Type     string `json:"type"`
	Thinking string `json:"thinking"`
}

type signatureDelta struct {
	Type      string `json:"type"`
	Signature string `json:"signature"`
}

type citationsDelta struct {
	Type     string          `json:"type"`
	Citation json.RawMessage `json:"citation"`
}

type inputJSONDelta struct {
	Type        string `json:"type"`
	PartialJSON string `json:"partial_json"`
}

type blockStopEvent struct {
	Type  string `json:"type"`
	Index int    `json:"index"`
}

type messageDeltaEvent struct {
	Type  string          `json:"type"`
	Delta messageDelta    `json:"delta"`
	Usage anthropic.Usage `json:"usage"`
}

type messageDelta struct {
	StopReason   string  `json:"stop_reason"`
	StopSequence *string `json:"stop_sequence"`
}

type typeOnly struct {
	Type string `json:"type"`
}

// emit numbers an event and writes it to out, unless out is nil (only the
// Message is built) or the client has it already. Every event's data has
// its type, as Anthropic's SDKs want it.
func (m *messageEvents) emit(out *sseWriter, typ string, ev any) {
	n := m.next
	m.next++
	if out != nil && n > m.after {
		out.Event(strconv.Itoa(n), typ, marshal(ev))
	}
}

func (m *messageEvents) begin(out *sseWriter) {
	msg := m.message()
	msg.Content, msg.StopReason, msg.Error = []any{}, nil, nil
	msg.Usage = anthropic.Usage{}
	m.emit(out, "message_start", messageStartEvent{Type: "message_start", Message: msg})
}

func (m *messageEvents) frame(out *sseWriter, e chunklog.Entry) {
	switch e.Frame.Kind {
	case wire.KindChunk:
		m.chunk(out, e.Frame)
	case wire.KindEnd:
		m.finish(out, e.Frame)
	}
}

// end follows the terminal event: message_stop (or the error) is the
// last.
func (m *messageEvents) end(*sseWriter) {}

// cut writes the error that ends a response the edge cannot finish (it
// drains, or lost the log), without an id: a client that resumes after
// its last event misses nothing.
func (m *messageEvents) cut(out *sseWriter, e *wire.Error) {
	out.typed("error", marshal(newAnthropicError(e)))
}

// ping is Anthropic's keepalive (handler_stream.go).
func (m *messageEvents) ping(out *sseWriter) {
	out.typed("ping", marshal(typeOnly{Type: "ping"}))
}

func (m *messageEvents) chunk(out *sseWriter, f wire.Frame) {
	m.model = cmp.Or(f.Model, m.model)
	if f.Seam != "" && m.open >= 0 && m.blocks[m.open].typ == "thinking" {
		m.stop(out)
	}
	if f.Reasoning != "" {
		i := m.block(out, "thinking")
		m.blocks[i].text.WriteString(f.Reasoning)
		m.emit(out, "content_block_delta", blockDeltaEvent{Type: "content_block_delta", Index: i, Delta: thinkingDelta{Type: "thinking_delta", Thinking: f.Reasoning}})
	}
	if f.ReasoningSignature != "" {
		i := m.block(out, "thinking")
		m.blocks[i].signature = f.ReasoningSignature
		m.emit(out, "content_block_delta", blockDeltaEvent{Type: "content_block_delta", Index: i, Delta: signatureDelta{Type: "signature_delta", Signature: f.ReasoningSignature}})
	}
	if f.RedactedReasoning != "" {
		b := &contentBlock{typ: "redacted_thinking"}
		b.text.WriteString(f.RedactedReasoning)
		m.start(out, b)
	}
	if f.NewBlock && m.open >= 0 && m.blocks[m.open].typ == "text" {
		m.stop(out)
	}
	m.citations(out, f.Citations)
	if f.Content != "" {
		i := m.block(out, "text")
		m.blocks[i].text.WriteString(f.Content)
		m.emit(out, "content_block_delta", blockDeltaEvent{Type: "content_block_delta", Index: i, Delta: textDelta{Type: "text_delta", Text: f.Content}})
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
	for _, d := range deltas {
		i, ok := m.calls[d.Index]
		if !ok {
			b := &contentBlock{typ: "tool_use", id: d.ID, name: d.Function.Name}
			if b.id == "" {
				b.id = fmt.Sprintf("toolu_%s_%d", m.v.id, len(m.blocks))
			}
			i = m.start(out, b)
			m.calls[d.Index] = i
		} else {
			m.blocks[i].name += d.Function.Name
		}
		if d.Function.Arguments != "" {
			m.blocks[i].text.WriteString(d.Function.Arguments)
			m.emit(out, "content_block_delta", blockDeltaEvent{Type: "content_block_delta", Index: i, Delta: inputJSONDelta{Type: "input_json_delta", PartialJSON: d.Function.Arguments}})
		}
	}
}

// citations renders a chunk's citations on the text block they open or
// continue.
func (m *messageEvents) citations(out *sseWriter, raw json.RawMessage) {
	var cs []json.RawMessage
	if len(raw) == 0 || json.Unmarshal(raw, &cs) != nil || len(cs) == 0 {
		// The worker stores the array a provider sent; anything else is
		// left out the same way on every edge.
		return
	}
	i := m.block(out, "text")
	for _, c := range cs {
		m.blocks[i].citations = append(m.blocks[i].citations, c)
		m.emit(out, "content_block_delta", blockDeltaEvent{Type: "content_block_delta", Index: i, Delta: citationsDelta{Type: "citations_delta", Citation: c}})
	}
}

// block is the index of the open block if it is of type typ (and not a
// signed, so finished, thinking block), or of a new one that replaces it.
func (m *messageEvents) block(out *sseWriter, typ string) int {
	if m.open >= 0 && m.blocks[m.open].typ == typ && m.blocks[m.open].signature == "" {
		return m.open
	}
	return m.start(out, &contentBlock{typ: typ})
}

// start closes the open block and opens b.
func (m *messageEvents) start(out *sseWriter, b *contentBlock) int {
	m.stop(out)
	m.open = len(m.blocks)
	m.blocks = append(m.blocks, b)
	m.emit(out, "content_block_start", blockStartEvent{Type: "content_block_start", Index: m.open, ContentBlock: b.object(false)})
	return m.open
}

// stop closes the open block, if any.
func (m *messageEvents) stop(out *sseWriter) {
	if m.open < 0 {
		return
	}
	m.emit(out, "content_block_stop", blockStopEvent{Type: "content_block_stop", Index: m.open})
	m.open = -1
}

// finish renders the end frame: a done stream stops its open block and
// the message; any other ends with the error that cut it, and nothing
// says it stopped.
func (m *messageEvents) finish(out *sseWriter, f wire.Frame) {
	m.endFrame = &f
	if f.Status != wire.StatusDone {
		m.emit(out, "error", newAnthropicError(endError(f)))
		return
	}
	m.stop(out)
	m.emit(out, "message_delta", messageDeltaEvent{Type: "message_delta", Delta: messageDelta{StopReason: stopReason(f), StopSequence: stopSequence(f)}, Usage: anthropic.UsageOf(f.Usage)})
	m.emit(out, "message_stop", typeOnly{Type: "message_stop"})
}

// message is the Message as rendered so far: stop_reason is null until
// the stream ended done; one that ended otherwise has the error that cut
// it.
func (m *messageEvents) message() messageObject {
	msg := messageObject{
		ID:      messageID(m.v.id),
		Type:    "message",
		Role:    "assistant",
		Model:   chat.AnsweredBy(m.endFrame, m.model, m.v.meta.Model),
		Content: make([]any, len(m.blocks)),
	}
	msg.Relay = chat.RelayOf(msg.Model, m.v.meta.Model)
	for i, b := range m.blocks {
		msg.Content[i] = b.object(true)
	}
	if m.endFrame == nil {
		return msg
	}
	f := *m.endFrame
	msg.Usage = anthropic.UsageOf(f.Usage)
	if f.Status == wire.StatusDone {
		reason := stopReason(f)
		msg.StopReason, msg.StopSequence = &reason, stopSequence(f)
	} else {
		e := newAnthropicError(endError(f)).Error
		msg.Error = &e
	}
	return msg
}
