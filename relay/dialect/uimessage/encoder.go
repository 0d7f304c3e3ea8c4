package uimessage

import (
	"encoding/json"
	"strconv"

	"github.com/relaydev/relay/relay/dialect/chat"
	"github.com/relaydev/relay/relay/wire"
)

// Header is the response header of a UI message stream, which the AI
// SDK's transports look for.
const (
	Header        = "X-Vercel-AI-UI-Message-Stream"
	HeaderVersion = "v1"
)

// Done is the data of the UI message stream's last SSE event.
const Done = "[DONE]"

// Encoder renders one stream's frames as UI message chunks, in order:
// start (with the message id) and start-step before the first frame's;
// text and reasoning as parts opened, filled and closed (a part ends where
// the other kind begins, or where the provider began a new block); a url
// citation as source-url; a tool call as tool-input-start and
// tool-input-delta while it streams and tool-input-available once the
// answer is done; then finish-step and finish with the finish reason. A stream that did not end done never
// finishes: it ends with error (failed, incomplete) or abort (cancelled),
// so that a cut answer never looks whole.
//
// Rendering is a function of the frames alone: the same frames give the
// same chunks, ids included, so that a stream served again from its start
// (a page that reloaded) replaces what the client had, chunk for chunk.
type Encoder struct {
	messageID string
	started   bool
	ended     bool
	// open is the part being streamed: its kind ("text", "reasoning"; ""
	// for none) and id. parts counts the parts opened, for their ids.
	open   string
	openID string
	parts  int
	tools  []*tool
	// sources counts the sources cited, for their ids.
	sources int
	// folding joins the deltas of one part that follow each other
	// (Fold); pend is the delta being joined.
	folding bool
	pend    *pendingDelta
}

// pendingDelta is a delta being folded: its chunk type, its part (a text
// or reasoning part's id, a tool call's id) and its text so far.
type pendingDelta struct {
	typ, part string
	text      []byte
}

// tool is a tool call being streamed, by its index in the chat deltas.
type tool struct {
	index     int
	id, name  string
	args      []byte
	announced bool
}

// NewEncoder renders the stream whose answer is the message messageID.
func NewEncoder(messageID string) *Encoder { return &Encoder{messageID: messageID} }

// MessageID is the message id of stream id's answer.
func MessageID(streamID string) string { return "msg_" + streamID }

// Start emits the chunks that begin the message; Frame emits them too
// when it is called first.
func (e *Encoder) Start(emit func([]byte)) {
	if e.started {
		return
	}
	emit = e.ordered(emit)
	e.started = true
	emit(marshal(struct {
		Type      string `json:"type"`
		MessageID string `json:"messageId"`
	}{"start", e.messageID}))
	emit([]byte(`{"type":"start-step"}`))
}

// Ended reports whether the stream's end was rendered.
func (e *Encoder) Ended() bool { return e.ended }

// Frame emits the chunks of frame f, each one JSON object; claims have
// none, and nothing follows an end.
func (e *Encoder) Frame(f wire.Frame, emit func([]byte)) {
	if e.ended || f.Kind != wire.KindChunk && f.Kind != wire.KindEnd {
		return
	}
	emit = e.ordered(emit)
	e.Start(emit)
	if f.Kind == wire.KindEnd {
		e.end(f, emit)
		return
	}
	if f.Reasoning != "" {
		e.delta("reasoning", f.Reasoning, false, emit)
	}
	if text := f.Content + f.Refusal; text != "" {
		e.delta("text", text, f.NewBlock, emit)
	}
	if len(f.Annotations) > 0 {
		e.citations(f.Annotations, emit)
	}
	if len(f.ToolCalls) > 0 {
		e.toolDeltas(f.ToolCalls, emit)
	}
}

// citations renders a chunk's url citations (chat's delta.annotations)
// as source-url chunks; annotations of other types have no UI chunk.
func (e *Encoder) citations(raw json.RawMessage, emit func([]byte)) {
	var annotations []struct {
		Type        string `json:"type"`
		URLCitation struct {
			URL   string `json:"url"`
			Title string `json:"title"`
		} `json:"url_citation"`
	}
	if json.Unmarshal(raw, &annotations) != nil {
		return
	}
	for _, a := range annotations {
		if a.Type != "url_citation" || a.URLCitation.URL == "" {
			continue
		}
		e.sources++
		emit(marshal(struct {
			Type     string `json:"type"`
			SourceID string `json:"sourceId"`
			URL      string `json:"url"`
			Title    string `json:"title,omitempty"`
		}{"source-url", "source-" + strconv.Itoa(e.sources), a.URLCitation.URL, a.URLCitation.Title}))
	}
}

// Cut emits the error that ends a response the server cannot finish:
// the client sees an error, not a finished answer, and may resume.
func (e *Encoder) Cut(err *wire.Error, emit func([]byte)) {
	emit = e.ordered(emit)
	e.Start(emit)
	e.ended = true
	emit(errorChunk(err.Message))
}

// delta adds text to the open part of kind, opening it first (and closing
// the other kind's, or this kind's when a new block begins).
func (e *Encoder) delta(kind, text string, newBlock bool, emit func([]byte)) {
	if e.open != kind || newBlock {
		e.close(emit)
		e.parts++
		e.open, e.openID = kind, kind+"-"+strconv.Itoa(e.parts)
		emit(partChunk(kind+"-start", e.openID))
	}
	e.deltaOut(emit, kind+"-delta", e.openID, text)
}

// Fold makes the Encoder join the deltas of one part that follow each
// other into one, until Unfold: what was said so far in a few chunks, for
// a resume that need not replay every event.
func (e *Encoder) Fold() { e.folding = true }

// Unfold emits the delta being folded, if any, and stops folding.
func (e *Encoder) Unfold(emit func([]byte)) {
	e.flush(emit)
	e.folding = false
}

// ordered is emit preceded by the delta being folded, so that chunks keep
// their order.
func (e *Encoder) ordered(emit func([]byte)) func([]byte) {
	return func(chunk []byte) {
		e.flush(emit)
		emit(chunk)
	}
}

// flush emits the delta being folded, if any.
func (e *Encoder) flush(emit func([]byte)) {
	if p := e.pend; p != nil {
		e.pend = nil
		emit(deltaChunk(p.typ, p.part, string(p.text)))
	}
}

// deltaOut emits a delta of type typ to part, or folds it into the one
// pending when folding.
func (e *Encoder) deltaOut(emit func([]byte), typ, part, text string) {
	if !e.folding {
		emit(deltaChunk(typ, part, text))
		return
	}
	if p := e.pend; p != nil && p.typ == typ && p.part == part {
		p.text = append(p.text, text...)
		return
	}
	e.flush(emit)
	e.pend = &pendingDelta{typ: typ, part: part, text: []byte(text)}
}

// deltaChunk is a text, reasoning or tool input delta.
func deltaChunk(typ, part, text string) []byte {
	if typ == "tool-input-delta" {
		return marshal(struct {
			Type           string `json:"type"`
			ToolCallID     string `json:"toolCallId"`
			InputTextDelta string `json:"inputTextDelta"`
		}{typ, part, text})
	}
	return marshal(struct {
		Type  string `json:"type"`
		ID    string `json:"id"`
		Delta string `json:"delta"`
	}{typ, part, text})
}

// close ends the open part, if any.
func (e *Encoder) close(emit func([]byte)) {
	if e.open != "" {
		emit(partChunk(e.open+"-end", e.openID))
		e.open, e.openID = "", ""
	}
}

// toolDeltas renders a chunk's tool call deltas (chat's tool_calls).
func (e *Encoder) toolDeltas(raw json.RawMessage, emit func([]byte)) {
	var deltas []struct {
		Index    int    `json:"index"`
		ID       string `json:"id"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	}
	if json.Unmarshal(raw, &deltas) != nil {
		return
	}
	e.close(emit)
	for _, d := range deltas {
		t := e.tool(d.Index)
		t.id += d.ID
		t.name += d.Function.Name
		t.args = append(t.args, d.Function.Arguments...)
		if !t.announced && t.id != "" && t.name != "" {
			t.announced = true
			emit(marshal(struct {
				Type       string `json:"type"`
				ToolCallID string `json:"toolCallId"`
				ToolName   string `json:"toolName"`
			}{"tool-input-start", t.id, t.name}))
			// What streamed before the call was named.
			d.Function.Arguments = string(t.args)
		}
		if t.announced && d.Function.Arguments != "" {
			e.deltaOut(emit, "tool-input-delta", t.id, d.Function.Arguments)
		}
	}
}

// tool is the call at index, added when new.
func (e *Encoder) tool(index int) *tool {
	for _, t := range e.tools {
		if t.index == index {
			return t
		}
	}
	t := &tool{index: index}
	e.tools = append(e.tools, t)
	return t
}

// end renders the end frame f.
func (e *Encoder) end(f wire.Frame, emit func([]byte)) {
	e.ended = true
	e.close(emit)
	switch f.Status {
	case wire.StatusDone:
		for _, t := range e.tools {
			e.toolInput(t, emit)
		}
		emit([]byte(`{"type":"finish-step"}`))
		emit(marshal(struct {
			Type         string `json:"type"`
			FinishReason string `json:"finishReason"`
		}{"finish", finishReason(chat.FinishReason(f))}))
	case wire.StatusCancelled:
		emit([]byte(`{"type":"abort","reason":"cancelled"}`))
	default:
		emit(errorChunk(chat.EndError(f).Message))
	}
}

// toolInput renders a finished tool call's input: tool-input-available
// with the arguments as JSON, or tool-input-error when they are none.
func (e *Encoder) toolInput(t *tool, emit func([]byte)) {
	if !t.announced {
		return
	}
	args := t.args
	if len(args) == 0 {
		args = []byte("{}")
	}
	if !json.Valid(args) {
		emit(marshal(struct {
			Type       string `json:"type"`
			ToolCallID string `json:"toolCallId"`
			ToolName   string `json:"toolName"`
			Input      string `json:"input"`
			ErrorText  string `json:"errorText"`
		}{"tool-input-error", t.id, t.name, string(t.args), "the model's arguments are not valid JSON"}))
		return
	}
	emit(marshal(struct {
		Type       string          `json:"type"`
		ToolCallID string          `json:"toolCallId"`
		ToolName   string          `json:"toolName"`
		Input      json.RawMessage `json:"input"`
	}{"tool-input-available", t.id, t.name, args}))
}

// finishReason is chat's finish reason in the UI message stream's words.
func finishReason(r string) string {
	switch r {
	case "stop", "length":
		return r
	case "tool_calls", "function_call":
		return "tool-calls"
	case "content_filter":
		return "content-filter"
	}
	return "other"
}

func partChunk(typ, id string) []byte {
	return marshal(struct {
		Type string `json:"type"`
		ID   string `json:"id"`
	}{typ, id})
}

func errorChunk(text string) []byte {
	return marshal(struct {
		Type      string `json:"type"`
		ErrorText string `json:"errorText"`
	}{"error", text})
}
