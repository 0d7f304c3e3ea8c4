package edge

import (
	"github.com/relaydev/relay/relay/chunklog"
	"github.com/relaydev/relay/relay/dialect/chat"
	"github.com/relaydev/relay/relay/dialect/responses"
	"github.com/relaydev/relay/relay/wire"
)

// responseEvents is the eventDialect of POST /v1/responses and its
// resumes: the dialect's Renderer (relay/dialect/responses) writing to the
// SSE stream being served.
type responseEvents struct{ r *responses.Renderer }

// newResponseEvents renders stream v, writing the events after sequence
// number after (-1: all).
func newResponseEvents(v chat.Stream, after int) responseEvents {
	return responseEvents{newResponseRenderer(v, after)}
}

// newResponseRenderer is the Renderer of stream v.
func newResponseRenderer(v chat.Stream, after int) *responses.Renderer {
	return responses.NewRenderer(responses.Stream{ID: v.ID, Model: v.Meta.Model, Created: v.Meta.Created}, after)
}

func (d responseEvents) begin(out *sseWriter) { d.r.Begin(responsesWriter{out}) }

func (d responseEvents) frame(out *sseWriter, e chunklog.Entry) {
	renderResponseFrame(d.r, responsesWriter{out}, e.Frame)
}

// end follows the terminal event: Responses streams end without [DONE].
func (d responseEvents) end(*sseWriter) {}

func (d responseEvents) cut(out *sseWriter, e *wire.Error) { d.r.Cut(responsesWriter{out}, e) }

// renderResponseFrame renders f, an end frame with the error it tells a
// client of any dialect (endError); a nil out builds the Response only.
func renderResponseFrame(r *responses.Renderer, out chat.EventWriter, f wire.Frame) {
	if f.Kind == wire.KindEnd {
		r.End(out, f, chat.EndError(f))
		return
	}
	r.Frame(out, f)
}

// responsesWriter writes the events of a Responses stream, which have no
// id line: a client resumes after a sequence number.
type responsesWriter struct{ out *sseWriter }

func (w responsesWriter) Event(_, event string, data []byte) { w.out.typed(event, data) }
