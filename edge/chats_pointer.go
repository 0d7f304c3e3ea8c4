package edge

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/relay/wire"
)

// # The chat pointer
//
// A chat (useChat's id) has at most one live generation per tenant. Its
// pointer is a record in wire.IdempotencyBucket, the bucket of records a
// client's key starts at most one stream under, which every edge reads
// and writes already, with the same expiry (streams.retention):
//
//	chat.<hex SHA-256 of tenant, chat id> = {stream id, created}
//
//  1. A POST /v1/chats creates it with KV Create naming a fresh stream id:
//     of any number of edges racing, one wins and starts the stream; the
//     record is deleted again if the start fails.
//  2. A POST that loses reads it. While the stream it names is live (no
//     end frame stored, not cancelled), the request attaches to it or is
//     refused with 409 chat_busy, as it asks (HeaderOnBusy).
//  3. A pointer whose stream ended (or was cancelled, or never appeared:
//     its edge died between the two writes) is superseded by a
//     revision-checked Update, so again only one request starts anew.
//  4. GET /v1/chats/{id}/stream and the stop read it: nothing live is a
//     204.
//
// Nothing deletes a pointer when its stream ends: whoever reads it next
// finds the stream's end, so an edge that was not serving the stream (its
// client had left) leaves nothing wrong behind.

// chatPointer is the record of a chat's latest generation.
type chatPointer struct {
	StreamID string `json:"stream_id"`
	// Created is the Unix time in milliseconds the record was written.
	Created int64 `json:"created"`
}

// chatPointerKey is the bucket key of a tenant's chat: hashed, so that the
// client's id never appears in a subject and tenants' chats never meet;
// its prefix keeps it apart from idempotency keys, which are bare hex.
func chatPointerKey(tenant, chatID string) string {
	h := sha256.New()
	h.Write([]byte(tenant))
	h.Write([]byte{0})
	h.Write([]byte(chatID))
	return "chat." + hex.EncodeToString(h.Sum(nil))
}

// CodeChatBusy answers a POST /v1/chats while the chat's generation runs
// and the request did not ask to attach (409).
const CodeChatBusy = "chat_busy"

// startChat starts req as the generation of tenant's chat, or attaches
// to the live one when attach is set (steps 1 to 3 above). A refusal
// because the chat is busy comes with the live stream's id.
func (s *Server) startChat(ctx context.Context, tenant, chatID string, attach bool, req chatRequest) (started, *wire.Error) {
	ctx, cancel := context.WithTimeout(ctx, 3*natsTimeout)
	defer cancel()
	kv, err := s.idem.bucket(ctx)
	if err != nil {
		return started{}, unavailable("reading the chat's generation", err)
	}
	key := chatPointerKey(tenant, chatID)
	for range idempotencyAttempts {
		id := s.parts.newStreamID(ctx)
		value := marshal(chatPointer{StreamID: id, Created: s.now().UnixMilli()})
		revision, err := s.idem.create(ctx, kv, key, value)
		if err == nil {
			return s.startRecorded(ctx, kv, key, revision, id, tenant, req)
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return started{}, natsWriteError("recording the chat's generation", err)
		}
		entry, err := kv.Get(ctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue // deleted meanwhile: a start failed
		}
		if err != nil {
			return started{}, unavailable("reading the chat's generation", err)
		}
		live, e := s.chatLive(ctx, tenant, entry)
		if e != nil {
			return started{}, e
		}
		if live.id != "" {
			if attach && live.starting {
				// Its edge is writing the Meta: attach once it is there.
				if meta, err := s.awaitMeta(ctx, live.id); err == nil && meta.Tenant == tenant {
					live.meta, live.starting = meta, false
				}
			}
			if attach && !live.starting {
				return started{id: live.id, meta: live.meta, replay: true}, nil
			}
			return started{id: live.id}, chatBusy(live.id)
		}
		revision, err = s.idem.replace(ctx, kv, key, value, entry.Revision())
		if err == nil {
			return s.startRecorded(ctx, kv, key, revision, id, tenant, req)
		}
		if !errors.Is(err, jetstream.ErrKeyRevisionMismatch) && !errors.Is(err, jetstream.ErrKeyExists) {
			return started{}, natsWriteError("recording the chat's generation", err)
		}
	}
	return started{}, unavailable("recording the chat's generation", errContended)
}

// liveChat is the live generation a pointer names: its stream id ("" for
// none) and Meta, unless its edge is still starting it (no Meta yet).
type liveChat struct {
	id       string
	meta     wire.Meta
	starting bool
}

// chatLive is the generation entry names, if it is live: its Meta exists
// and is tenant's, it is not cancelled and its end is not stored. A
// pointer younger than twice natsTimeout whose Meta is missing is a
// start in progress on another edge: live too.
func (s *Server) chatLive(ctx context.Context, tenant string, entry jetstream.KeyValueEntry) (liveChat, *wire.Error) {
	var p chatPointer
	if json.Unmarshal(entry.Value(), &p) != nil || !wire.ValidStreamID(p.StreamID) {
		return liveChat{}, nil
	}
	meta, _, err := s.meta.get(ctx, p.StreamID)
	switch {
	case errors.Is(err, errNoMeta):
		if s.now().Sub(entry.Created()) < 2*natsTimeout {
			return liveChat{id: p.StreamID, starting: true}, nil
		}
		return liveChat{}, nil
	case err != nil:
		return liveChat{}, unavailable("reading stream metadata", err)
	case meta.Tenant != tenant || meta.Cancelled:
		return liveChat{}, nil
	}
	tail, err := s.reader.LastEntry(ctx, p.StreamID)
	if err != nil {
		return liveChat{}, unavailable("reading the stream's last frame", err)
	}
	if tail.Frame.Kind == wire.KindEnd {
		return liveChat{}, nil
	}
	return liveChat{id: p.StreamID, meta: meta}, nil
}

// liveChatOf is tenant's chat's live generation, if any (step 4 above).
func (s *Server) liveChatOf(ctx context.Context, tenant, chatID string) (liveChat, *wire.Error) {
	ctx, cancel := context.WithTimeout(ctx, natsTimeout)
	defer cancel()
	kv, err := s.idem.bucket(ctx)
	if err != nil {
		return liveChat{}, unavailable("reading the chat's generation", err)
	}
	entry, err := kv.Get(ctx, chatPointerKey(tenant, chatID))
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return liveChat{}, nil
	case err != nil:
		return liveChat{}, unavailable("reading the chat's generation", err)
	}
	return s.chatLive(ctx, tenant, entry)
}

// chatBusy is the 409 of a submit while stream id, the chat's
// generation, runs.
func chatBusy(id string) *wire.Error {
	return &wire.Error{
		Message: "this chat's answer is still being generated (stream " + id + "): follow it with GET /v1/chats/{id}/stream, stop it with POST /v1/chats/{id}/stop, or send the header " + HeaderOnBusy + ": attach",
		Type:    wire.TypeInvalidRequest,
		Code:    CodeChatBusy,
		Status:  http.StatusConflict,
	}
}
