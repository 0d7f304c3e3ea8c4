package chunklog

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Direct gets are answered by any replica of a replicated stream, and a
// follower may not yet hold a message the leader has acknowledged: "not
// found" from a direct get is not proof of absence (NATS-NOTES.md, "Direct
// gets in a replicated stream can be stale"). A reader that knows the
// message should exist (a cursor it was given, a stream id the relay
// acknowledged) confirms a miss with LeaderGet before it says "gone". A hit
// costs nothing more; a miss costs one more round trip, to the leader.

// LeaderQuery is what LeaderGet asks for: the message at Seq, the first
// one stored on NextFor at Seq or after, or the last one stored on
// LastFor.
type LeaderQuery struct {
	Seq     uint64 `json:"seq,omitempty"`
	NextFor string `json:"next_by_subj,omitempty"`
	LastFor string `json:"last_by_subj,omitempty"`
}

// StoredMsg is a message as the stream's leader holds it.
type StoredMsg struct {
	Subject string
	Seq     uint64
	Header  nats.Header
	Data    []byte
}

// msgGetResponse is the STREAM.MSG.GET API's reply.
type msgGetResponse struct {
	Message *struct {
		Subject string `json:"subject"`
		Seq     uint64 `json:"seq"`
		Header  []byte `json:"hdrs,omitempty"`
		Data    []byte `json:"data,omitempty"`
	} `json:"message"`
	Error *struct {
		Code        int    `json:"code"`
		ErrCode     int    `json:"err_code"`
		Description string `json:"description"`
	} `json:"error"`
}

// errCodeNoMessage is JetStream's error code for "no message found".
const errCodeNoMessage = 10037

// LeaderGet reads one message of stream through the non-direct
// STREAM.MSG.GET API, which only the stream's leader answers: what it does
// not find is not stored. found is false when there is no such message.
// apiPrefix is "$JS.API." (or empty for it) or a domain's prefix. It needs
// the meta group (the server checks the stream's assignment), so it is for
// misses only: the direct gets keep working without it.
func LeaderGet(ctx context.Context, nc *nats.Conn, apiPrefix, stream string, q LeaderQuery) (StoredMsg, bool, error) {
	if apiPrefix == "" {
		apiPrefix = "$JS.API."
	}
	body, _ := json.Marshal(q)
	what := fmt.Sprintf("leader get %s %+v", stream, q)
	reply, err := nc.RequestWithContext(ctx, apiPrefix+"STREAM.MSG.GET."+stream, body)
	if err != nil {
		return StoredMsg{}, false, fmt.Errorf("chunklog: %s: %w", what, err)
	}
	var resp msgGetResponse
	if err := json.Unmarshal(reply.Data, &resp); err != nil {
		return StoredMsg{}, false, fmt.Errorf("chunklog: %s: %w", what, err)
	}
	switch {
	case resp.Error != nil && resp.Error.ErrCode == errCodeNoMessage:
		return StoredMsg{}, false, nil
	case resp.Error != nil:
		// As jetstream's own calls report it, so that streams.Leaderless
		// knows a leader that is not there yet.
		apiErr := &jetstream.APIError{Code: resp.Error.Code, ErrorCode: jetstream.ErrorCode(resp.Error.ErrCode), Description: resp.Error.Description}
		return StoredMsg{}, false, fmt.Errorf("chunklog: %s: %w", what, apiErr)
	case resp.Message == nil:
		return StoredMsg{}, false, fmt.Errorf("chunklog: %s: reply without a message", what)
	}
	m := StoredMsg{Subject: resp.Message.Subject, Seq: resp.Message.Seq, Data: resp.Message.Data}
	if len(resp.Message.Header) > 0 {
		if m.Header, err = nats.DecodeHeadersMsg(resp.Message.Header); err != nil {
			return StoredMsg{}, false, fmt.Errorf("chunklog: %s: headers: %w", what, err)
		}
	}
	return m, true, nil
}
