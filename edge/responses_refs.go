package edge

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/relaydev/relay/relay/wire"
)

// Clients of the Responses API that store responses (the default) send
// the items of earlier answers back by reference instead of in full: the
// Vercel AI SDK's openai(model) sends {"type": "item_reference", "id":
// "msg_..."} for every assistant message of a conversation that it got
// from a response. The relay's item ids name the stream that produced
// them ("msg_<stream id>_<n>", "fc_…", "rs_…"; responses_events.go), and
// the stream stays in the durable log for the retention, so a reference is
// resolved by rendering that stream's Response (snapshot) and taking the
// item: any edge can, and only the stream's tenant may.

// CodeItemNotFound answers an item_reference the relay cannot resolve: an
// id that is not one of its items, of a stream that expired or is another
// tenant's, or that the stream has no such item.
const CodeItemNotFound = "item_not_found"

// expandReferences replaces the item_reference items of a Responses
// request body by the items they name, as tenant sees them. A body with
// none is returned as it is.
func (s *Server) expandReferences(ctx context.Context, tenant string, body []byte) ([]byte, *wire.Error) {
	if !bytes.Contains(body, []byte("item_reference")) {
		return body, nil
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(body, &fields) != nil {
		return body, nil // parseResponsesRequest says what is wrong
	}
	var items []json.RawMessage
	if json.Unmarshal(fields["input"], &items) != nil {
		return body, nil
	}
	responses := map[string]responseObject{} // by stream id
	changed := false
	for i, raw := range items {
		var ref struct{ Type, ID string }
		if json.Unmarshal(raw, &ref) != nil || ref.Type != "item_reference" {
			continue
		}
		sid, ok := streamOfItem(ref.ID)
		if !ok {
			return nil, itemNotFound(i, ref.ID)
		}
		resp, seen := responses[sid]
		if !seen {
			var e *wire.Error
			resp, e = s.snapshot(ctx, tenant, sid)
			switch {
			case e != nil && e.Code == CodeResponseNotFound:
				return nil, itemNotFound(i, ref.ID)
			case e != nil:
				return nil, e
			}
			responses[sid] = resp
		}
		item, ok := findItem(resp.Output, ref.ID)
		if !ok {
			return nil, itemNotFound(i, ref.ID)
		}
		items[i] = marshal(item)
		changed = true
	}
	if !changed {
		return body, nil
	}
	fields["input"] = marshal(items)
	return marshal(fields), nil
}

// streamOfItem returns the stream id an output item id of the relay names:
// "<kind>_<stream id>_<index>".
func streamOfItem(id string) (string, bool) {
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

// findItem returns the output item with the id.
func findItem(output []any, id string) (any, bool) {
	for _, it := range output {
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

func itemNotFound(i int, id string) *wire.Error {
	return invalid(fmt.Sprintf("input[%d].id", i), CodeItemNotFound,
		"item %q does not exist or has expired: the relay resolves references to the items of its own responses, for their retention", id)
}
