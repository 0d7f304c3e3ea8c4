package edge

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/relay/dialect/responses"
	"github.com/relaydev/relay/relay/wire"
)

// A Responses request may name the response it follows up on
// (previous_response_id) instead of sending the conversation again. The
// relay keeps each response's input, as it received it with its own
// previous response prepended, in the stream metadata bucket
// (wire.MetaBucket) under conversationKey, for the bucket's TTL (the
// streams' retention); the output is the stream's own, read from the
// durable log. A follow-up's input is then that input, that output and
// its own, in this order; instructions are not carried over, as OpenAI
// does not carry them. A response made with "store": false is not kept.
// An input too large for one bucket value (the NATS max_payload) is not
// kept either: a record says so, and a follow-up naming it is refused
// rather than sent a shortened conversation.

// Codes of a previous_response_id the relay cannot follow.
const (
	// CodePreviousResponseNotFound is OpenAI's: unknown, expired, not
	// stored, or another tenant's.
	CodePreviousResponseNotFound = "previous_response_not_found"
	// CodePreviousResponseTooLarge: its conversation was too large to keep.
	CodePreviousResponseTooLarge = "previous_response_too_large"
	// CodePreviousResponseInProgress: it is still being generated.
	CodePreviousResponseInProgress = "previous_response_in_progress"
)

// conversation is the record a response's input is kept in.
type conversation struct {
	Tenant string            `json:"tenant"`
	Input  []json.RawMessage `json:"input,omitempty"`
	// TooLarge says the input was too large to keep.
	TooLarge bool `json:"too_large,omitempty"`
}

// conversationKey is the key of stream id's conversation; no stream id
// has a dot, so it is never a stream's metadata key.
func conversationKey(id string) string { return "conversation." + id }

// conversationRoom is what a record needs beyond its input items.
const conversationRoom = 1 << 10

// continueConversation returns body with the conversation of its
// previous_response_id, if any, prepended to its input (and the id
// removed), and the input as it is then, as tenant may see it. keep is
// false for a response that asks not to be stored. A body that does not
// parse is returned as it is: parseResponsesRequest says what is wrong.
func (s *Server) continueConversation(ctx context.Context, tenant string, body []byte, maxBytes int64) (out []byte, input []json.RawMessage, keep bool, e *wire.Error) {
	var fields map[string]json.RawMessage
	if json.Unmarshal(body, &fields) != nil {
		return body, nil, false, nil
	}
	input, ok := inputItems(fields["input"])
	keep = ok && string(fields["store"]) != "false"
	raw, named := fields["previous_response_id"]
	if !named || string(raw) == "null" || !ok {
		return body, input, keep, nil
	}
	var id string
	if json.Unmarshal(raw, &id) != nil {
		return nil, nil, false, invalid("previous_response_id", CodeInvalidValue, "'previous_response_id' must be a string")
	}
	sid, ok := responses.StreamOfResponse(id)
	if !ok {
		return nil, nil, false, previousNotFound(id)
	}
	rec, e := s.conversationOf(ctx, tenant, sid, id)
	if e != nil {
		return nil, nil, false, e
	}
	resp, e := s.snapshot(ctx, tenant, sid)
	switch {
	case e != nil && e.Code == CodeResponseNotFound:
		return nil, nil, false, previousNotFound(id)
	case e != nil:
		return nil, nil, false, e
	case resp.Status == responses.StatusQueued || resp.Status == responses.StatusInProgress:
		return nil, nil, false, invalid("previous_response_id", CodePreviousResponseInProgress,
			"previous response %s is still %s: follow up on it once it ended", id, resp.Status)
	}
	full := append([]json.RawMessage(nil), rec.Input...)
	for _, item := range resp.Output {
		full = append(full, marshal(item))
	}
	full = append(full, input...)
	fields["input"] = marshal(full)
	delete(fields, "previous_response_id")
	out = marshal(fields)
	if int64(len(out)) > maxBytes {
		e := invalid("previous_response_id", CodeBodyTooLarge,
			"this relay takes requests of at most %d bytes, and with the conversation of %s this one exceeds that: send the conversation as input, shortened", maxBytes, id)
		e.Status = http.StatusRequestEntityTooLarge
		return nil, nil, false, e
	}
	return out, full, keep, nil
}

// inputItems is a Responses input as items: a string is one user
// message. !ok when it is neither.
func inputItems(raw json.RawMessage) (items []json.RawMessage, ok bool) {
	var text string
	if json.Unmarshal(raw, &text) == nil {
		return []json.RawMessage{marshal(map[string]string{"role": "user", "content": text})}, true
	}
	return items, json.Unmarshal(raw, &items) == nil && items != nil
}

// conversationOf reads the kept conversation of stream sid, the response
// id; another tenant's is not found.
func (s *Server) conversationOf(ctx context.Context, tenant, sid, id string) (conversation, *wire.Error) {
	ctx, cancel := context.WithTimeout(ctx, natsTimeout)
	defer cancel()
	kv, err := s.meta.bucket(ctx)
	if err != nil {
		return conversation{}, unavailable("reading the previous response", err)
	}
	entry, err := kv.Get(ctx, conversationKey(sid))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return conversation{}, previousNotFound(id)
	}
	if err != nil {
		return conversation{}, unavailable("reading the previous response", err)
	}
	var rec conversation
	if json.Unmarshal(entry.Value(), &rec) != nil || rec.Tenant != tenant {
		return conversation{}, previousNotFound(id)
	}
	if rec.TooLarge {
		return conversation{}, invalid("previous_response_id", CodePreviousResponseTooLarge,
			"the conversation of %s was too large for the relay to keep: send the conversation as input", id)
	}
	return rec, nil
}

// keepConversation stores the input of stream sid for tenant, or that it
// was too large to keep. A failure is logged: the response is served,
// and a follow-up naming it is told it is not found.
func (s *Server) keepConversation(ctx context.Context, tenant, sid string, input []json.RawMessage) {
	ctx, cancel := context.WithTimeout(ctx, natsTimeout)
	defer cancel()
	value := marshal(conversation{Tenant: tenant, Input: input})
	if int64(len(value)) > s.nc.MaxPayload()-conversationRoom {
		value = marshal(conversation{Tenant: tenant, TooLarge: true})
	}
	kv, err := s.meta.bucket(ctx)
	if err == nil {
		_, err = kv.Put(ctx, conversationKey(sid), value)
	}
	if err != nil {
		s.log.Warn("keeping a response's conversation failed", "stream_id", sid, "err", err)
	}
}

// previousNotFound is OpenAI's answer to a previous_response_id it does
// not know: a 400 naming the parameter.
func previousNotFound(id string) *wire.Error {
	return &wire.Error{
		Message: "Previous response with id '" + id + "' not found.",
		Type:    wire.TypeInvalidRequest,
		Param:   "previous_response_id",
		Code:    CodePreviousResponseNotFound,
		Status:  http.StatusBadRequest,
	}
}
