package responses

import (
	"strings"

	"github.com/relaydev/relay/relay/wire"
)

// The ids of a Response and of its output items name the stream they came
// from, so that any edge finds it in the durable log without a lookup:
// "resp_<stream id>", and "<kind>_<stream id>_<output index>" for an item
// (msg, fc, rs).

// ResponseID is the Response id of stream streamID.
func ResponseID(streamID string) string { return "resp_" + streamID }

// StreamOfResponse is the stream id of a Response id; false when it is not
// one the relay gave out.
func StreamOfResponse(id string) (string, bool) {
	s, ok := strings.CutPrefix(id, "resp_")
	return s, ok && wire.ValidStreamID(s)
}

// StreamOfItem is the stream id of an output item id; false when it is not
// one the relay gave out.
func StreamOfItem(id string) (string, bool) {
	kind, rest, ok := strings.Cut(id, "_")
	if !ok || (kind != "msg" && kind != "fc" && kind != "rs") {
		return "", false
	}
	i := strings.LastIndexByte(rest, '_')
	if i < 0 || !wire.ValidStreamID(rest[:i]) {
		return "", false
	}
	return rest[:i], true
}

// Item is the output item of r with the id, as the Response renders it.
func (r Response) Item(id string) (any, bool) {
	for _, it := range r.Output {
		var itemID string
		switch it := it.(type) {
		case messageItem:
			itemID = it.ID
		case functionCallItem:
			itemID = it.ID
		case reasoningItem:
			itemID = it.ID
		}
		if itemID == id {
			return it, true
		}
	}
	return nil, false
}
