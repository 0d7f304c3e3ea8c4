package edge

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"

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
//
// A reference of a few dozen bytes can name an answer of megabytes, so the
// work of a request is bounded before it is done: its items are counted
// against the message cap before any is resolved (a reference is one
// item), each stream is read once however often it is named, and the
// expanded body may not grow past the edge's max_body_bytes, what the
// client could have sent in full.

// CodeItemNotFound answers an item_reference the relay cannot resolve: an
// id that is not one of its items, of a stream that expired or is another
// tenant's, or that the stream has no such item.
const CodeItemNotFound = "item_not_found"

// expandReferences replaces the item_reference items of a Responses
// request body by the items they name, as tenant sees them: at most
// maxItems items (negative: any), and a body of at most maxBytes once
// expanded. A body with none is returned as it is.
func (s *Server) expandReferences(ctx context.Context, tenant string, body []byte, maxItems int, maxBytes int64) ([]byte, *wire.Error) {
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
	if maxItems >= 0 && len(items) > maxItems {
		return nil, invalid("input", CodeLimitExceeded,
			"'input' has %d items, item references included; this relay allows at most %d messages", len(items), maxItems)
	}
	refs, e := referencesOf(items)
	if e != nil {
		return nil, e
	}
	if len(refs) == 0 {
		return body, nil
	}
	wanted := map[string][]string{} // item ids by stream id
	for _, ref := range refs {
		wanted[ref.stream] = append(wanted[ref.stream], ref.id)
	}
	resolved := map[string]json.RawMessage{} // by item id
	size := int64(len(body))
	for _, ref := range refs {
		if ids, unread := wanted[ref.stream]; unread {
			delete(wanted, ref.stream)
			if e := s.resolveItems(ctx, tenant, ref, ids, resolved); e != nil {
				return nil, e
			}
		}
		item, ok := resolved[ref.id]
		if !ok {
			return nil, itemNotFound(ref.index, ref.id)
		}
		size += int64(len(item) - len(items[ref.index]))
		if size > maxBytes {
			e := invalid(fmt.Sprintf("input[%d]", ref.index), CodeBodyTooLarge,
				"this relay takes requests of at most %d bytes, and with its item references resolved this one exceeds that at input[%d]: send a shorter conversation", maxBytes, ref.index)
			e.Status = http.StatusRequestEntityTooLarge
			return nil, e
		}
		items[ref.index] = item
	}
	fields["input"] = marshal(items)
	return marshal(fields), nil
}

// itemRef is an item_reference of a request's input.
type itemRef struct {
	index      int // in the input
	id, stream string
}

// referencesOf lists the item references among items, in order.
func referencesOf(items []json.RawMessage) ([]itemRef, *wire.Error) {
	var refs []itemRef
	for i, raw := range items {
		var ref struct{ Type, ID string }
		if json.Unmarshal(raw, &ref) != nil || ref.Type != "item_reference" {
			continue
		}
		sid, ok := responses.StreamOfItem(ref.ID)
		if !ok {
			return nil, itemNotFound(i, ref.ID)
		}
		refs = append(refs, itemRef{index: i, id: ref.ID, stream: sid})
	}
	return refs, nil
}

// resolveItems reads the stream of ref once and adds the items of it that
// the request names (ids) to resolved, encoded; the snapshot itself, which
// may hold much more than they, is not kept.
func (s *Server) resolveItems(ctx context.Context, tenant string, ref itemRef, ids []string, resolved map[string]json.RawMessage) *wire.Error {
	resp, e := s.snapshot(ctx, tenant, ref.stream)
	switch {
	case e != nil && e.Code == CodeResponseNotFound:
		return itemNotFound(ref.index, ref.id)
	case e != nil:
		return e
	}
	for _, id := range ids {
		if _, done := resolved[id]; done {
			continue
		}
		if item, ok := resp.Item(id); ok {
			resolved[id] = marshal(item)
		}
	}
	return nil
}

func itemNotFound(i int, id string) *wire.Error {
	return invalid(fmt.Sprintf("input[%d].id", i), CodeItemNotFound,
		"item %q does not exist or has expired: the relay resolves references to the items of its own responses, for their retention", id)
}
