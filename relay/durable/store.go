package durable

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/relay/backoff"
	"github.com/relaydev/relay/relay/chunklog"
	"github.com/relaydev/relay/relay/streams"
	"github.com/relaydev/relay/relay/wire"
)

// Errors of the store; the protocol's status for each is in edge/durable.
var (
	// ErrNotFound: no stream at the path (or it expired).
	ErrNotFound = errors.New("durable: stream not found")
	// ErrGone: the stream was deleted while forks still read it, or the
	// data asked for is past the log's retention.
	ErrGone = errors.New("durable: stream gone")
	// ErrConflict: a PUT whose configuration differs from the stream's.
	ErrConflict = errors.New("durable: stream exists with another configuration")
	// ErrSeqConflict: a Stream-Seq not above the last one.
	ErrSeqConflict = errors.New("durable: Stream-Seq is not above the last one")
	// ErrBadForkOffset: a fork offset past the source's tail, or a
	// sub-offset past the next append's end.
	ErrBadForkOffset = errors.New("durable: fork offset past the source's data")
)

// ClosedError refuses an append to a closed stream; Tail is its final
// offset.
type ClosedError struct{ Tail wire.Offset }

func (e *ClosedError) Error() string { return "durable: stream is closed" }

// Store keeps Durable Streams in the relay's log and their records in
// wire.MetaBucket.
type Store struct {
	js     jetstream.JetStream
	reader *chunklog.Reader
	bucket *streams.Bucket
	next   func(context.Context) int
	now    func() time.Time
}

// New returns a store appending through js and reading with reader;
// next is the k of the partition of Durable Streams a new stream goes to
// (wire.DurablePartition(k), k below the partitions the assets record).
func New(js jetstream.JetStream, reader *chunklog.Reader, next func(context.Context) int) *Store {
	return &Store{js: js, reader: reader, bucket: streams.NewBucket(js, wire.MetaBucket, 0), next: next, now: time.Now}
}

// newID is a fresh stream id in the next partition of Durable Streams:
// their chunk subjects are apart from the generations', and the only
// ones an edge may write.
func (s *Store) newID(ctx context.Context) string {
	return wire.NewStreamIDIn(wire.DurablePartition(s.next(ctx)))
}

// Stream is an opened stream: its record and the record's revision.
type Stream struct {
	Record
	revision uint64
}

// IsJSON reports whether content type t is JSON mode's.
func IsJSON(t string) bool { return MediaType(t) == "application/json" }

// MediaType is t without parameters, in lower case.
func MediaType(t string) string {
	if mt, _, err := mime.ParseMediaType(t); err == nil {
		return mt
	}
	mt, _, _ := strings.Cut(t, ";")
	return strings.ToLower(strings.TrimSpace(mt))
}

func (s *Store) kv(ctx context.Context) (jetstream.KeyValue, error) {
	kv, err := s.bucket.KV(ctx)
	if err != nil {
		return nil, fmt.Errorf("durable: bucket %s: %w", wire.MetaBucket, err)
	}
	return kv, nil
}

// The stream and subjects behind wire.MetaBucket, as nats.go's KV lays
// them out.
const (
	recordStream        = "KV_" + wire.MetaBucket
	recordSubjectPrefix = "$KV." + wire.MetaBucket + "."
)

// get reads the record at key, expired or not; found is false without
// one. It asks the bucket's leader: a KV get is direct, answered by any
// replica, and one may not hold yet a record another edge just created,
// changed or deleted. Both cost one round trip.
func (s *Store) get(ctx context.Context, key string) (st *Stream, found bool, err error) {
	m, found, err := s.leaderGet(ctx, recordStream, chunklog.LeaderQuery{LastFor: recordSubjectPrefix + key})
	switch op := m.Header.Get("KV-Operation"); {
	case err != nil:
		return nil, false, fmt.Errorf("durable: read record: %w", err)
	case !found, op == "DEL", op == "PURGE", m.Header.Get(jetstream.MarkerReasonHeader) != "":
		return nil, false, nil
	}
	return decodeRecord(m.Data, m.Seq)
}

// leaderSpacing and leaderTries pace the tries of a read from a stream's
// leader while JetStream answers that it is temporarily unavailable (a
// loaded server's view of the stream lagging behind): a second or two at
// most, so that a read never outlasts an edge's drain.
var leaderSpacing = backoff.Backoff{Config: backoff.Config{Base: 20 * time.Millisecond, Cap: 500 * time.Millisecond}}

const leaderTries = 8

// codeUnavailable is JetStream's "temporarily unavailable".
const codeUnavailable = 10008

// leaderGet is chunklog.LeaderGet on stream, tried again while JetStream
// answers that it is temporarily unavailable.
func (s *Store) leaderGet(ctx context.Context, stream string, q chunklog.LeaderQuery) (chunklog.StoredMsg, bool, error) {
	for n := 0; ; n++ {
		m, found, err := chunklog.LeaderGet(ctx, s.js.Conn(), "", stream, q)
		var apiErr *jetstream.APIError
		if err == nil || !errors.As(err, &apiErr) || apiErr.ErrorCode != codeUnavailable || n+1 >= leaderTries {
			return m, found, err
		}
		if leaderSpacing.Sleep(ctx, leaderSpacing.Delay(n, 0)) != nil {
			return m, found, err
		}
	}
}

func decodeRecord(value []byte, revision uint64) (*Stream, bool, error) {
	st := &Stream{revision: revision}
	if err := json.Unmarshal(value, &st.Record); err != nil {
		return nil, false, fmt.Errorf("durable: decode record: %w", err)
	}
	return st, true, nil
}

// Open returns the tenant's stream at path: ErrNotFound if there is none
// or it expired, ErrGone if it was deleted while forks read it.
func (s *Store) Open(ctx context.Context, tenant, path string) (*Stream, error) {
	st, found, err := s.get(ctx, keyOf(tenant, path))
	switch {
	case err != nil:
		return nil, err
	case !found || st.expired(s.now()):
		return nil, ErrNotFound
	case st.Deleted:
		return nil, ErrGone
	}
	return st, nil
}

// put writes st's record over the revision it was read at (0: creates
// it); it returns jetstream.ErrKeyExists or ErrKeyRevisionMismatch when
// another writer came first.
func (s *Store) put(ctx context.Context, st *Stream) error {
	kv, err := s.kv(ctx)
	if err != nil {
		return err
	}
	value, err := json.Marshal(st.Record)
	if err != nil {
		return fmt.Errorf("durable: encode record: %w", err)
	}
	if st.revision == 0 {
		st.revision, err = kv.Create(ctx, st.Key(), value)
	} else {
		st.revision, err = kv.Update(ctx, st.Key(), value, st.revision)
	}
	return err
}

// Touch restarts a stream's sliding TTL: every read and write does, HEAD
// excepted. A lost race with another toucher is as good as a touch.
func (s *Store) Touch(ctx context.Context, st *Stream) {
	if st.TTL == nil {
		return
	}
	st.Touched = s.now().UnixMilli()
	_ = s.put(ctx, st)
}

// Tail is a stream's end: the offset after its last data, and whether
// it is closed.
type Tail struct {
	Offset wire.Offset
	Closed bool
	state  state
	last   uint64 // JetStream sequence of the last frame
}

// tailOf reads the tail from the stream's last frame, asked of its
// leader: an append must see every frame stored before it, and a read on
// one edge what was appended on another.
func (s *Store) tailOf(ctx context.Context, id string) (Tail, error) {
	m, found, err := s.leaderGet(ctx, wire.ChunkStreamOf(id), chunklog.LeaderQuery{LastFor: wire.ChunkSubject(id)})
	if err != nil {
		return Tail{}, fmt.Errorf("durable: last frame of %s: %w", id, err)
	}
	if !found {
		return Tail{}, ErrGone
	}
	f, err := wire.DecodeFrame(m.Data)
	if err != nil {
		return Tail{}, fmt.Errorf("durable: last frame of %s: %w", id, err)
	}
	e := chunklog.Entry{JSSeq: m.Seq, Frame: f}
	st, err := stateOf(e.Frame)
	if err != nil {
		return Tail{}, err
	}
	t := Tail{state: st, last: e.JSSeq}
	switch {
	case st.Tail != nil:
		t.Offset = *st.Tail
	case e.Frame.Kind == wire.KindChunk:
		t.Offset = wire.Offset{Seq: e.Frame.Seq, JSSeq: e.JSSeq}
	default:
		t.Offset = wire.Offset{JSSeq: e.JSSeq}
	}
	t.Closed = e.Frame.Kind == wire.KindEnd
	return t, nil
}

// TailOf returns the stream's tail.
func (s *Store) TailOf(ctx context.Context, st *Stream) (Tail, error) {
	return s.tailOf(ctx, st.ID)
}

// maxContentBytes bounds an append's data stored as text in a frame, as
// JSON escapes it: text that escapes to more (quotes, control characters)
// is stored as bytes, whose base64 grows by a third only, so that any
// append of edge.durable_streams.max_append_bytes fits a NATS message.
const maxContentBytes = 896 << 10

// dataFrame is the chunk frame of an append's data: as text where it is
// UTF-8 (GET /v1/streams/{id} shows it), else as bytes.
func dataFrame(data []byte, st state) wire.Frame {
	f := wire.Frame{Kind: wire.KindChunk, Durable: st.encode()}
	if utf8.Valid(data) && len(wire.AppendJSONString(nil, string(data))) <= maxContentBytes {
		f.Content = string(data)
	} else {
		f.Data = data
	}
	return f
}

// chunkData is the data of a chunk frame.
func chunkData(f wire.Frame) []byte {
	if len(f.Data) > 0 {
		return f.Data
	}
	return []byte(f.Content)
}

// endFrame closes a stream whose data ends at tail.
func endFrame(st state, tail wire.Offset, closer *Producer) wire.Frame {
	st.Messages = 0
	st.Tail = &tail
	st.Closer = closer
	return wire.Frame{Kind: wire.KindEnd, Status: wire.StatusDone, FinishReason: "stop", Durable: st.encode()}
}
