package chat

import (
	"cmp"

	"github.com/relaydev/relay/relay/wire"
)

// EventWriter is where a dialect's renderer queues the events of a stream
// it renders for a client (the edge's SSE writer): an event with its id
// and type. A renderer given a nil EventWriter only builds its object.
type EventWriter interface {
	Event(id, event string, data []byte)
}

// AnsweredBy is the model an object rendered so far names: the one that
// finished the answer (end, once rendered), else the latest chunk's
// (last), else requested, the model asked for.
func AnsweredBy(end *wire.Frame, last, requested string) string {
	if end != nil && end.Model != "" {
		return end.Model
	}
	return cmp.Or(last, requested)
}

// ModelRelay is the relay member of a Response or a Message whose model
// is not the one asked for.
type ModelRelay struct {
	RequestedModel string `json:"requested_model"`
}

// RelayOf is the relay member of an object that names model: nil when
// that is requested, the model asked for.
func RelayOf(model, requested string) *ModelRelay {
	if model == requested {
		return nil
	}
	return &ModelRelay{RequestedModel: requested}
}
