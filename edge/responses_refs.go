package edge

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/relaydev/relay/relay/dialect/responses"
	"github.com/relaydev/relay/relay/wire"
)

// Clients of the Responses API that store responses (the default) send
// the items of earlier answers back by reference instead of in full: the
// Vercel AI SDK's openai(model) sends {"type": "item_reference", "id":
// "msg_..."} for every assistant message of a conversation that it got
// from a response. The relay's item ids name the stream that produced
// them ("msg_<stream id>_<n>", "fc_…", "rs_…"; relay/dialect/responses), and
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
	snapshots := map[string]responses.Response{} // by stream id
	changed := false
	for i, raw := range items {
		var ref struct{ Type, ID string }
		if json.Unmarshal(raw, &ref) != nil || ref.Type != "item_reference" {
			continue
		}
		sid, ok := responses.StreamOfItem(ref.ID)
		if !ok {
			return nil, itemNotFound(i, ref.ID)
		}
		resp, seen := snapshots[sid]
		if !seen {
			var e *wire.Error
			resp, e = s.snapshot(ctx, tenant, sid)
			switch {
			case e != nil && e.Code == CodeResponseNotFound:
				return nil, itemNotFound(i, ref.ID)
			case e != nil:
				return nil, e
			}
			snapshots[sid] = resp
		}
		item, ok := resp.Item(ref.ID)
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

func itemNotFound(i int, id string) *wire.Error {
	return invalid(fmt.Sprintf("input[%d].id", i), CodeItemNotFound,
		"item %q does not exist or has expired: the relay resolves references to the items of its own responses, for their retention", id)
}
