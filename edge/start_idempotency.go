package edge

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/relay/wire"
)

// # Idempotency
//
// A POST /v1/chat/completions (or a WebSocket start) with an
// Idempotency-Key, or else an X-Request-Id, starts at most one generation
// per key and tenant within Config.IdempotencyWindow (wire.IdempotencyRecord
// is the record):
//
//  1. The request is validated first: a refused one records nothing.
//  2. A record {stream id, body hash} is created with KV Create: the first
//     request (of any number racing, on any edges) wins and starts the
//     stream under that id; the record is deleted again if the start fails.
//  3. A request that loses reads the record. Another body: 409
//     idempotency_key_reused. The same body: it is served that stream,
//     running or finished, from the start, with Idempotent-Replayed: true;
//     its Meta may trail the record by a moment, so it is awaited.
//  4. A record older than the window, or one whose stream never appeared
//     (its edge died between the two writes), is replaced by a
//     revision-checked Update, so again only one request starts anew.
//
// Without either header every POST starts a new generation.

// Headers of idempotent requests.
const (
	HeaderIdempotencyKey     = "Idempotency-Key"
	HeaderRequestID          = "X-Request-Id"
	HeaderIdempotentReplayed = "Idempotent-Replayed"
)

// Error codes of idempotent requests.
const (
	// CodeIdempotencyKeyReused: the key started a stream with another body
	// (409).
	CodeIdempotencyKeyReused = "idempotency_key_reused"
	// CodeIdempotencyKeyInUse: the first request with the key is still
	// being accepted (503, retry).
	CodeIdempotencyKeyInUse = "idempotency_key_in_use"
)

// maxIdempotencyKey bounds a key's length, as Stripe does.
const maxIdempotencyKey = 255

// idempotencyAttempts bounds the create/read/replace rounds of one request:
// each lost one means another request changed the record in between.
const idempotencyAttempts = 5

// metaPoll is how often a replay looks for the Meta of a stream whose
// record it found.
const metaPoll = 10 * time.Millisecond

// idempotencyKeyOf is the request's Idempotency-Key, or else its
// X-Request-Id; "" when it has neither.
func idempotencyKeyOf(r *http.Request) (string, *wire.Error) {
	key, param := r.Header.Get(HeaderIdempotencyKey), HeaderIdempotencyKey
	if key == "" {
		key, param = r.Header.Get(HeaderRequestID), HeaderRequestID
	}
	return key, checkIdempotencyKey(key, param)
}

// checkIdempotencyKey accepts up to maxIdempotencyKey printable ASCII
// characters.
func checkIdempotencyKey(key, param string) *wire.Error {
	if len(key) > maxIdempotencyKey {
		return invalid(param, CodeInvalidValue, "%s is longer than %d characters", param, maxIdempotencyKey)
	}
	for i := range len(key) {
		if key[i] < 0x20 || key[i] > 0x7e {
			return invalid(param, CodeInvalidValue, "%s must be printable ASCII", param)
		}
	}
	return nil
}

// idempotencyStore binds wire.IdempotencyBucket on first use: only
// requests with a key need it.
type idempotencyStore struct {
	bucketHandle
}

func newIdempotencyStore(js jetstream.JetStream) *idempotencyStore {
	return &idempotencyStore{newBucketHandle(js, wire.IdempotencyBucket)}
}

// create records the key for stream id.
func (m *idempotencyStore) create(ctx context.Context, kv jetstream.KeyValue, recordKey string, value []byte) (uint64, error) {
	return m.write(ctx, kv, recordKey, value, func(ctx context.Context) (uint64, error) {
		return kv.Create(ctx, recordKey, value)
	})
}

// replace records the key for another stream, in place of the stale
// record at revision.
func (m *idempotencyStore) replace(ctx context.Context, kv jetstream.KeyValue, recordKey string, value []byte, revision uint64) (uint64, error) {
	return m.write(ctx, kv, recordKey, value, func(ctx context.Context) (uint64, error) {
		return kv.Update(ctx, recordKey, value, revision)
	})
}

// write stores value, a record naming a fresh stream id, with put (a
// create, or an update of a known revision), trying again while the
// bucket has no leader (start_submit_wait.go). A try that timed out may have
// stored it all the same: the next try is then refused, and finds the
// key holding value byte for byte (no other request's record names the
// same stream), which it takes as its own.
func (m *idempotencyStore) write(ctx context.Context, kv jetstream.KeyValue, recordKey string, value []byte, put func(context.Context) (uint64, error)) (uint64, error) {
	var revision uint64
	tried := false
	err := retryLeaderless(ctx, func(ctx context.Context) error {
		var err error
		revision, err = put(ctx)
		if tried && (errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch)) {
			if entry, gerr := kv.Get(ctx, recordKey); gerr == nil && bytes.Equal(entry.Value(), value) {
				revision, err = entry.Revision(), nil
			}
		}
		tried = true
		return err
	})
	return revision, err
}

// start starts a generation of req for tenant, or, when key is set,
// attaches to the one the key started (steps 2 to 4 above).
func (s *Server) start(ctx context.Context, tenant, key string, req chatRequest) (started, *wire.Error) {
	if key == "" || s.cfg.IdempotencyWindow < 0 {
		return s.startNew(ctx, s.parts.newStreamID(ctx), tenant, req)
	}
	ctx, cancel := context.WithTimeout(ctx, 3*natsTimeout)
	defer cancel()
	kv, err := s.idem.bucket(ctx)
	if err != nil {
		return started{}, unavailable("reading idempotency keys", err)
	}
	recordKey := wire.IdempotencyKey(tenant, key)
	sum := sha256.Sum256(req.Body)
	bodyHash := hex.EncodeToString(sum[:])
	for range idempotencyAttempts {
		id := s.parts.newStreamID(ctx)
		value := marshal(wire.IdempotencyRecord{StreamID: id, BodySHA256: bodyHash, Created: s.now().UnixMilli()})
		revision, err := s.idem.create(ctx, kv, recordKey, value)
		if err == nil {
			return s.startRecorded(ctx, kv, recordKey, revision, id, tenant, req)
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return started{}, natsWriteError("recording the idempotency key", err)
		}
		entry, err := kv.Get(ctx, recordKey)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue // deleted meanwhile: a start failed
		}
		if err != nil {
			return started{}, unavailable("reading the idempotency key", err)
		}
		var rec wire.IdempotencyRecord
		stale := json.Unmarshal(entry.Value(), &rec) != nil || s.now().Sub(entry.Created()) > s.cfg.IdempotencyWindow
		if !stale {
			if rec.BodySHA256 != bodyHash {
				e := invalid(HeaderIdempotencyKey, CodeIdempotencyKeyReused,
					"this idempotency key was already used with a different request body")
				e.Status = http.StatusConflict
				return started{}, e
			}
			meta, err := s.awaitMeta(ctx, rec.StreamID)
			switch {
			case err == nil:
				if meta.Tenant != tenant {
					// Keys are scoped by tenant, so this cannot happen;
					// never serve another tenant's stream if it does.
					return started{}, unavailable("reading the idempotency key", errors.New("record names a foreign stream"))
				}
				return started{id: rec.StreamID, meta: meta, replay: true}, nil
			case !errors.Is(err, errNoMeta):
				return started{}, unavailable("reading stream metadata", err)
			case s.now().Sub(entry.Created()) < 2*natsTimeout:
				return started{}, &wire.Error{
					Message: "The first request with this idempotency key is still being accepted; retry the request.",
					Type:    wire.TypeServer,
					Code:    CodeIdempotencyKeyInUse,
					Status:  http.StatusServiceUnavailable,
				}
			}
			// Its edge failed between the record and the Meta: start anew.
		}
		revision, err = s.idem.replace(ctx, kv, recordKey, value, entry.Revision())
		if err == nil {
			return s.startRecorded(ctx, kv, recordKey, revision, id, tenant, req)
		}
		if !errors.Is(err, jetstream.ErrKeyRevisionMismatch) && !errors.Is(err, jetstream.ErrKeyExists) {
			return started{}, natsWriteError("recording the idempotency key", err)
		}
	}
	return started{}, unavailable("recording the idempotency key", errContended)
}

// startRecorded starts the stream a record at revision names; if that
// fails, the record goes, so that a retry can start it.
func (s *Server) startRecorded(ctx context.Context, kv jetstream.KeyValue, recordKey string, revision uint64, id, tenant string, req chatRequest) (started, *wire.Error) {
	st, e := s.startNew(ctx, id, tenant, req)
	if e != nil {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), natsTimeout)
		defer cancel()
		if err := kv.Delete(dctx, recordKey, jetstream.LastRevision(revision)); err != nil {
			s.log.Warn("idempotency record of a failed start not deleted", "stream_id", id, "err", err)
		}
		return started{}, e
	}
	return st, nil
}

// awaitMeta returns the Meta of stream id, waiting up to natsTimeout for it
// to appear; errNoMeta if it did not.
func (s *Server) awaitMeta(ctx context.Context, id string) (wire.Meta, error) {
	ctx, cancel := context.WithTimeout(ctx, natsTimeout)
	defer cancel()
	for {
		meta, _, err := s.meta.get(ctx, id)
		if err != nil && ctx.Err() != nil {
			return wire.Meta{}, errNoMeta
		}
		if !errors.Is(err, errNoMeta) {
			return meta, err
		}
		select {
		case <-ctx.Done():
			return wire.Meta{}, errNoMeta
		case <-time.After(metaPoll):
		}
	}
}
