package anthropic

import (
	"cmp"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

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
// unsigned (signature ""). So every edge that renders a stream from its
// first frame numbers every event the same, and a resume after event N
// renders the stream from its start and writes only the events after N. A
// takeover or a continuation is invisible here too: the worker stores the
// text that follows the seam, as any chunk. Pings (PingData) and the error
// that ends a response an edge cannot finish have no id: they are not the
// stream's.

// Events renders one stream's frames as Anthropic events, and builds its
// Message as it goes (for an answer without "stream", or a snapshot).
type Events struct {
	// id and requested are the stream's id and the model it asked for.
	id, requested string
	// next is the number of the next event. Events numbered up to after
	// are rendered but not written: a resume after them.
	next, after int
	blocks      []*contentBlock
	// open is the index of the open block; -1 for none.
	open int
	// calls maps a chat tool call's index to its block's index.
	calls map[int]int
	// endFrame is the end frame, once rendered, and endErr what cut a
	// stream that did not end done.
	endFrame *wire.Frame
	endErr   *wire.Error
	// model is the model of the latest chunk: the one answering.
	model string
	// folding is set while deltas are folded (Fold); held is the delta
	// rendered last, numbered heldID, not yet written: the next delta of
	// the same block is added to it.
	folding bool
	held    *blockDeltaEvent
	heldID  int
	// heldText is held's text so far, set in held when it is written.
	heldText strings.Builder
}

// NewEvents renders stream streamID, which asked for model requested,
// writing the events after number after (-1: all).
func NewEvents(streamID, requested string, after int) *Events {
	return &Events{id: streamID, requested: requested, after: after, open: -1, calls: map[int]int{}}
}

type messageStartEvent struct {
	Type    string  `json:"type"`
	Message Message `json:"message"`
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
	Type  string       `json:"type"`
	Delta messageDelta `json:"delta"`
	Usage Usage        `json:"usage"`
}

type messageDelta struct {
	StopReason   string  `json:"stop_reason"`
	StopSequence *string `json:"stop_sequence"`
}

type typeOnly struct {
	Type string `json:"type"`
}

// PingData is the data of Anthropic's keepalive event, ping.
const PingData = `{"type":"ping"}`

// emit numbers an event and writes it to out, unless out is nil (only the
// Message is built) or the client has it already. Every event's data has
// its type, as Anthropic's SDKs want it.
func (m *Events) emit(out chat.EventWriter, typ string, ev any) {
	n := m.next
	m.next++
	if out == nil || n <= m.after {
		return
	}
	if m.folding {
		d, ok := ev.(blockDeltaEvent)
		if ok && m.held != nil && m.fold(d) {
			m.heldID = n
			return
		}
		m.writeHeld(out)
		if _, text, foldable := deltaText(d); ok && foldable {
			m.held, m.heldID = &d, n
			m.heldText.Reset()
			m.heldText.WriteString(text)
			return
		}
	}
	out.Event(strconv.Itoa(n), typ, marshal(ev))
}

// Fold starts folding: until Unfold, the deltas of one block that follow
// each other (text, thinking, a tool's input) are written as one event,
// with the id of the last of them. A resume with snapshot folds the events
// the client has not seen, so that it gets what was said so far in a few
// events rather than one per token; each event's id is still a point to
// resume after, as the events it folds come before it.
func (m *Events) Fold() { m.folding = true }

// Unfold writes the delta held, if any, and stops folding.
func (m *Events) Unfold(out chat.EventWriter) {
	m.writeHeld(out)
	m.folding = false
}

func (m *Events) writeHeld(out chat.EventWriter) {
	if m.held == nil {
		return
	}
	text := m.heldText.String()
	switch d := m.held.Delta.(type) {
	case textDelta:
		d.Text = text
		m.held.Delta = d
	case thinkingDelta:
		d.Thinking = text
		m.held.Delta = d
	case inputJSONDelta:
		d.PartialJSON = text
		m.held.Delta = d
	}
	out.Event(strconv.Itoa(m.heldID), "content_block_delta", marshal(*m.held))
	m.held = nil
}

// deltaText is the type and text of d, if it is a delta that Fold folds:
// signatures and citations are not text to add to.
func deltaText(d blockDeltaEvent) (typ, text string, ok bool) {
	switch e := d.Delta.(type) {
	case textDelta:
		return e.Type, e.Text, true
	case thinkingDelta:
		return e.Type, e.Thinking, true
	case inputJSONDelta:
		return e.Type, e.PartialJSON, true
	}
	return "", "", false
}

// fold adds delta d to the held one if both are deltas of one kind of the
// same block, and reports whether it did.
func (m *Events) fold(d blockDeltaEvent) bool {
	typ, text, ok := deltaText(d)
	held, _, _ := deltaText(*m.held)
	if !ok || m.held.Index != d.Index || typ != held {
		return false
	}
	m.heldText.WriteString(text)
	return true
}

// Begin renders message_start, which precedes the first frame.
func (m *Events) Begin(out chat.EventWriter) {
	msg := m.Message()
	msg.Content, msg.StopReason, msg.Error = []any{}, nil, nil
	msg.Usage = Usage{}
	m.emit(out, "message_start", messageStartEvent{Type: "message_start", Message: msg})
}

// Chunk renders a chunk frame.
func (m *Events) Chunk(out chat.EventWriter, f wire.Frame) {
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
	// Chat's tool_calls fragments: a call named by index, its arguments
	// split across chunks.
	var deltas []struct {
		Index    int
		ID, Type string
		Function chat.Function
	}
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
				b.id = fmt.Sprintf("toolu_%s_%d", m.id, len(m.blocks))
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
func (m *Events) citations(out chat.EventWriter, raw json.RawMessage) {
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
func (m *Events) block(out chat.EventWriter, typ string) int {
	if m.open >= 0 && m.blocks[m.open].typ == typ && m.blocks[m.open].signature == "" {
		return m.open
	}
	return m.start(out, &contentBlock{typ: typ})
}

// start closes the open block and opens b.
func (m *Events) start(out chat.EventWriter, b *contentBlock) int {
	m.stop(out)
	m.open = len(m.blocks)
	m.blocks = append(m.blocks, b)
	m.emit(out, "content_block_start", blockStartEvent{Type: "content_block_start", Index: m.open, ContentBlock: b.object(false)})
	return m.open
}

// stop closes the open block, if any.
func (m *Events) stop(out chat.EventWriter) {
	if m.open < 0 {
		return
	}
	m.emit(out, "content_block_stop", blockStopEvent{Type: "content_block_stop", Index: m.open})
	m.open = -1
}

// End renders the end frame: a done stream stops its open block and the
// message; any other ends with cut, the error a client is told of it, and
// nothing says it stopped.
func (m *Events) End(out chat.EventWriter, f wire.Frame, cut *wire.Error) {
	m.endFrame = &f
	if f.Status != wire.StatusDone {
		m.endErr = cut
		m.emit(out, "error", ErrorOf(cut).Body())
		return
	}
	m.stop(out)
	m.emit(out, "message_delta", messageDeltaEvent{Type: "message_delta", Delta: messageDelta{StopReason: stopReason(f), StopSequence: stopSequence(f)}, Usage: UsageOf(f.Usage)})
	m.emit(out, "message_stop", typeOnly{Type: "message_stop"})
}

// Message is the Message as rendered so far: stop_reason is null until
// the stream ended done; one that ended otherwise has the error that cut
// it.
func (m *Events) Message() Message {
	msg := Message{
		ID:      MessageID(m.id),
		Type:    "message",
		Role:    "assistant",
		Model:   chat.AnsweredBy(m.endFrame, m.model, m.requested),
		Content: make([]any, len(m.blocks)),
	}
	msg.Relay = chat.RelayOf(msg.Model, m.requested)
	for i, b := range m.blocks {
		msg.Content[i] = b.object(true)
	}
	if m.endFrame == nil {
		return msg
	}
	f := *m.endFrame
	msg.Usage = UsageOf(f.Usage)
	if f.Status == wire.StatusDone {
		reason := stopReason(f)
		msg.StopReason, msg.StopSequence = &reason, stopSequence(f)
	} else {
		e := ErrorOf(m.endErr)
		msg.Error = &e
	}
	return msg
}
