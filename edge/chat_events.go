package edge

import (
	"encoding/json"

	"github.com/relaydev/relay/relay/chunklog"
	"github.com/relaydev/relay/relay/dialect/chat"
	"github.com/relaydev/relay/relay/wire"
)

// chatEvents renders frames as chat completion chunks (relay/dialect/chat),
// each with its cursor as the event id, and ends with [DONE] (the
// eventDialect of chat completions and GET /v1/streams/{id}).
type chatEvents struct{ s chat.Stream }

func (c *chatEvents) begin(*sseWriter) {}

func (c *chatEvents) frame(out *sseWriter, e chunklog.Entry) {
	cursor := cursorOf(e)
	out.cursorEvent(c.s.Cursors, cursor, func(b []byte) []byte { return c.s.AppendObject(b, cursor, &e.Frame) })
	// The first event carries the stream's resume token, if any.
	c.s.ResumeToken = ""
}

func (c *chatEvents) end(out *sseWriter) { out.done() }

// cut ends the response with an error event without an id.
func (c *chatEvents) cut(out *sseWriter, e *wire.Error) {
	out.event("", marshal(struct {
		Error chat.Error `json:"error"`
	}{chat.ErrorOf(e)}))
}

func cursorOf(e chunklog.Entry) wire.Cursor {
	return wire.Cursor{Seq: e.Frame.Seq, JSSeq: e.JSSeq}
}

// marshal renders an object the edge built; none can fail to encode.
func marshal(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic("edge: encode: " + err.Error())
	}
	return b
}
