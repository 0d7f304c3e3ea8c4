package edge

import (
	"context"
	"crypto/sha256"
	"encoding/hex"

	"github.com/relaydev/relay/edge/follow"
	"github.com/relaydev/relay/relay/wire"
)

// Starting a generation: after the handler admitted a request
// (handler_chat.go), startFor starts it as a new stream or attaches it to
// the one it repeats, by the client's idempotency key (start_idempotency.go) or
// an SDK's retry (start_sdk_retry.go); startNew follows the new stream and
// submits it to the workers (start_submit.go).

// started is the stream a request started, or attached to (replay).
type started struct {
	id     string
	meta   wire.Meta
	replay bool
	// f follows a stream the request started, subscribed before the
	// request was queued (Hub.FollowNew); nil for a replay. Whoever serves
	// the stream closes it.
	f *follow.Follower
}

// startFor starts req as opts say: with the client's idempotency key, as
// an SDK's attempt (start_sdk_retry.go), or as a new generation.
func (s *Server) startFor(ctx context.Context, opts startOptions, req chatRequest) (started, *wire.Error) {
	if opts.key != "" || opts.sdkAttempt < 0 || s.cfg.IdempotencyWindow < 0 {
		return s.start(ctx, opts.p.tenant, opts.key, req)
	}
	key := sdkKey(req.Body)
	if opts.sdkAttempt > 0 {
		return s.start(ctx, opts.p.tenant, key, req)
	}
	id := s.parts.newStreamID(ctx)
	st, e := s.startNew(ctx, id, opts.p.tenant, req)
	if e != nil {
		return st, e
	}
	sum := sha256.Sum256(req.Body)
	rec := wire.IdempotencyRecord{StreamID: id, BodySHA256: hex.EncodeToString(sum[:]), Created: s.now().UnixMilli()}
	rctx, cancel := context.WithTimeout(ctx, natsTimeout)
	defer cancel()
	kv, err := s.idem.bucket(rctx)
	if err == nil {
		_, err = kv.Put(rctx, wire.IdempotencyKey(opts.p.tenant, key), marshal(rec))
	}
	if err != nil {
		// A retry then starts anew, as it would without this record.
		s.log.Warn("SDK attempt not recorded", "stream_id", id, "err", err)
	}
	return st, nil
}

// startNew follows the new stream id and then submits it, so that its
// follower needs no history read (Hub.FollowNew).
func (s *Server) startNew(ctx context.Context, id, tenant string, req chatRequest) (started, *wire.Error) {
	f, err := s.hub.FollowNew(ctx, id, s.cfg.ClientBuffer)
	if err != nil {
		return started{}, unavailable("following the stream", err)
	}
	id, meta, e := s.submit(ctx, id, tenant, req)
	if e != nil {
		f.Close()
		return started{}, e
	}
	return started{id: id, meta: meta, f: f}, nil
}
