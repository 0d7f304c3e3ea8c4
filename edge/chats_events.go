package edge

import (
	"github.com/relaydev/relay/relay/chunklog"
	"github.com/relaydev/relay/relay/dialect/uimessage"
	"github.com/relaydev/relay/relay/wire"
)

// uiMessageEvents is the eventDialect of the chat routes: the UI message
// stream's renderer (uimessage.Encoder) on the edge's SSE writer, each
// chunk a data line without an id (the AI SDK resumes a chat from its
// start, never after an event), then [DONE].
type uiMessageEvents struct{ *uimessage.Encoder }

func (u uiMessageEvents) begin(out *sseWriter) { u.Start(emitTo(out)) }

func (u uiMessageEvents) frame(out *sseWriter, e chunklog.Entry) { u.Frame(e.Frame, emitTo(out)) }

func (u uiMessageEvents) end(out *sseWriter) { out.done() }

// cut ends a response the edge cannot finish with an error chunk: useChat
// shows it, and a resume serves the generation again from its start.
func (u uiMessageEvents) cut(out *sseWriter, e *wire.Error) { u.Cut(e, emitTo(out)) }

// emitTo queues each chunk as an event of out.
func emitTo(out *sseWriter) func([]byte) {
	return func(chunk []byte) { out.event("", chunk) }
}

// fold takes e into a snapshot: the deltas of a part that follow each
// other become one (uimessage.Encoder.Fold).
func (u uiMessageEvents) fold(out *sseWriter, e chunklog.Entry) {
	u.Fold()
	u.frame(out, e)
}

func (u uiMessageEvents) snapshot(out *sseWriter) { u.Unfold(emitTo(out)) }
