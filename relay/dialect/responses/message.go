package responses

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/relaydev/relay/relay/dialect/chat"
	"github.com/relaydev/relay/relay/wire"
)

// A message item's content parts, in the order they began: output_text for
// the answer, refusal for a refusal (OpenAI's two kinds). Each part is
// announced by content_part.added when its first fragment comes, so an
// answer, the common case, renders as it always did: output_item.added,
// content_part.added, output_text.delta...
const (
	partText    = "output_text"
	partRefusal = "refusal"
)

// refusalPart is a refusal content part.
type refusalPart struct {
	Type    string `json:"type"`
	Refusal string `json:"refusal"`
}

// refusalDeltaEvent is a response.refusal.delta; refusalDoneEvent a
// response.refusal.done.
type refusalDeltaEvent struct {
	eventHead
	ItemID       string `json:"item_id"`
	OutputIndex  int    `json:"output_index"`
	ContentIndex int    `json:"content_index"`
	Delta        string `json:"delta"`
}

type refusalDoneEvent struct {
	eventHead
	ItemID       string `json:"item_id"`
	OutputIndex  int    `json:"output_index"`
	ContentIndex int    `json:"content_index"`
	Refusal      string `json:"refusal"`
}

// annotationEvent is a response.output_text.annotation.added.
type annotationEvent struct {
	eventHead
	ItemID          string          `json:"item_id"`
	OutputIndex     int             `json:"output_index"`
	ContentIndex    int             `json:"content_index"`
	AnnotationIndex int             `json:"annotation_index"`
	Annotation      json.RawMessage `json:"annotation"`
}

// messageChunk renders what a chunk says of the answer's message: text
// with its logprobs entries, annotations of the text, a refusal.
func (r *Renderer) messageChunk(out chat.EventWriter, f wire.Frame) {
	it := r.message(out)
	if f.Content != "" || len(f.Annotations) > 0 {
		ci := r.part(out, it, partText)
		if f.Content != "" {
			it.text.WriteString(f.Content)
			entries := logprobsContent(f.Logprobs)
			it.logprobs = append(it.logprobs, entries...)
			r.emit(out, "response.output_text.delta", &textDeltaEvent{ItemID: it.id, OutputIndex: r.msg, ContentIndex: ci, Delta: f.Content, Logprobs: entries})
		}
		var as []json.RawMessage
		if json.Unmarshal(f.Annotations, &as) == nil {
			for _, a := range as {
				a = responsesAnnotation(a)
				it.annotations = append(it.annotations, a)
				r.emit(out, "response.output_text.annotation.added", &annotationEvent{ItemID: it.id, OutputIndex: r.msg, ContentIndex: ci,
					AnnotationIndex: len(it.annotations) - 1, Annotation: a})
			}
		}
	}
	if f.Refusal != "" {
		ci := r.part(out, it, partRefusal)
		it.refusal.WriteString(f.Refusal)
		r.emit(out, "response.refusal.delta", &refusalDeltaEvent{ItemID: it.id, OutputIndex: r.msg, ContentIndex: ci, Delta: f.Refusal})
	}
}

// message is the open message item, opened if there is none.
func (r *Renderer) message(out chat.EventWriter) *outputItem {
	if r.msg >= 0 {
		return r.items[r.msg]
	}
	r.msg = len(r.items)
	it := &outputItem{id: fmt.Sprintf("msg_%s_%d", r.s.ID, r.msg), status: StatusInProgress}
	r.items = append(r.items, it)
	r.emit(out, "response.output_item.added", &itemEvent{OutputIndex: r.msg, Item: it.object(false)})
	return it
}

// part returns the content index of the open message's part of kind,
// added if the message has none.
func (r *Renderer) part(out chat.EventWriter, it *outputItem, kind string) int {
	if ci := slices.Index(it.parts, kind); ci >= 0 {
		return ci
	}
	it.parts = append(it.parts, kind)
	ci := len(it.parts) - 1
	r.emit(out, "response.content_part.added", &partEvent{ItemID: it.id, OutputIndex: r.msg, ContentIndex: ci, Part: it.partObject(kind, false)})
	return ci
}

// closeParts renders the done events of message oi's parts.
func (r *Renderer) closeParts(out chat.EventWriter, oi int, it *outputItem) {
	for ci, kind := range it.parts {
		part := it.partObject(kind, true)
		switch kind {
		case partText:
			text := part.(outputText)
			r.emit(out, "response.output_text.done", &textDoneEvent{ItemID: it.id, OutputIndex: oi, ContentIndex: ci, Text: text.Text, Logprobs: text.Logprobs})
		case partRefusal:
			r.emit(out, "response.refusal.done", &refusalDoneEvent{ItemID: it.id, OutputIndex: oi, ContentIndex: ci, Refusal: it.refusal.String()})
		}
		r.emit(out, "response.content_part.done", &partEvent{ItemID: it.id, OutputIndex: oi, ContentIndex: ci, Part: part})
	}
}

// partObject renders a part of the message: as it is now, or empty, as
// content_part.added announces it.
func (it *outputItem) partObject(kind string, now bool) any {
	if kind == partRefusal {
		p := refusalPart{Type: "refusal"}
		if now {
			p.Refusal = it.refusal.String()
		}
		return p
	}
	if !now {
		return newOutputText("", nil, nil)
	}
	return newOutputText(it.text.String(), it.annotations, it.logprobs)
}

// logprobsContent is the content array of a chunk's logprobs object, whose
// entries are what output_text logprobs hold; empty, not nil, for none.
func logprobsContent(raw json.RawMessage) []json.RawMessage {
	var lp struct {
		Content []json.RawMessage `json:"content"`
	}
	if len(raw) == 0 || json.Unmarshal(raw, &lp) != nil || lp.Content == nil {
		// A logprobs object of another shape is left out the same way
		// on every edge.
		return []json.RawMessage{}
	}
	return lp.Content
}

// responsesAnnotation is a chat annotation in the Responses' shape: a
// chat url_citation nests its fields under "url_citation", the Responses
// has them beside "type". Other annotations are kept as they came.
func responsesAnnotation(a json.RawMessage) json.RawMessage {
	var chat struct {
		Type        string                     `json:"type"`
		URLCitation map[string]json.RawMessage `json:"url_citation"`
	}
	if json.Unmarshal(a, &chat) != nil || chat.Type != "url_citation" || chat.URLCitation == nil {
		return a
	}
	flat := map[string]json.RawMessage{"type": json.RawMessage(`"url_citation"`)}
	for k, v := range chat.URLCitation {
		flat[k] = v
	}
	return marshal(flat)
}
