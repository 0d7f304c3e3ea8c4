package edge

import (
	"github.com/relaydev/relay/relay/chunklog"
	"github.com/relaydev/relay/relay/dialect/anthropic"
	"github.com/relaydev/relay/relay/dialect/chat"
	"github.com/relaydev/relay/relay/wire"
)

// messageEvents is the eventDialect of POST /v1/messages and its resumes:
// the dialect's renderer (anthropic.Events, which numbers the events so
// that a resume on any edge writes exactly the ones after its
// Last-Event-ID) on the edge's SSE writer.
type messageEvents struct{ *anthropic.Events }

// newMessageEvents renders stream v, writing the events after number
// after (-1: all).
func newMessageEvents(v chat.Stream, after int) messageEvents {
	return messageEvents{anthropic.NewEvents(v.ID, v.Meta.Model, after)}
}

func (m messageEvents) begin(out *sseWriter) { m.Begin(out) }

func (m messageEvents) frame(out *sseWriter, e chunklog.Entry) { m.add(out, e.Frame) }

// add renders frame f on out; nil builds the Message only.
func (m messageEvents) add(out chat.EventWriter, f wire.Frame) {
	switch f.Kind {
	case wire.KindChunk:
		m.Chunk(out, f)
	case wire.KindEnd:
		m.End(out, f, chat.EndError(f))
	}
}

// end follows the terminal event: message_stop (or the error) is the
// last.
func (m messageEvents) end(*sseWriter) {}

// cut writes the error that ends a response the edge cannot finish (it
// drains, or lost the log), without an id: a client that resumes after
// its last event misses nothing.
func (m messageEvents) cut(out *sseWriter, e *wire.Error) {
	out.typed("error", marshal(anthropic.ErrorOf(e).Body()))
}

// ping is Anthropic's keepalive (handler_stream.go).
func (m messageEvents) ping(out *sseWriter) { out.typed("ping", []byte(anthropic.PingData)) }
