package durable

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/relay/chunklog"
	"github.com/relaydev/relay/relay/wire"
)

// Spec is a PUT's configuration of a stream.
type Spec struct {
	ContentType string
	TTL         *int64
	ExpiresAt   *time.Time
	Closed      bool
	Fork        *ForkSpec
}

// ForkSpec asks for a fork of the tenant's stream at path Source, at
// Offset (nil: the source's tail) and SubOffset bytes or messages past it.
type ForkSpec struct {
	Source    string
	Offset    *wire.Offset
	SubOffset int64
}

// claimModel names what generated a Durable Stream on its claim frame,
// where a generation's names the model the client asked for.
const claimModel = "durable-stream"

// Create makes the tenant's stream at path with initial data (its
// messages, for a JSON stream), or finds it: created is false when a
// stream with the same configuration is there already (ErrConflict when
// its configuration differs). A fork's errors are ErrNotFound (no
// source), ErrConflict (a deleted source, another content type) and
// ErrBadForkOffset.
func (s *Store) Create(ctx context.Context, tenant, path string, spec Spec, data []byte, messages int) (st *Stream, t Tail, created bool, err error) {
	old, found, err := s.get(ctx, keyOf(tenant, path))
	if err != nil {
		return nil, Tail{}, false, err
	}
	if found && !old.expired(s.now()) {
		return s.existing(ctx, old, spec)
	}
	st = &Stream{Record: Record{Tenant: tenant, Path: path, ContentType: spec.ContentType, TTL: spec.TTL, ExpiresAt: spec.ExpiresAt}}
	if found {
		st.revision = old.revision
	}
	var src *Stream
	var inherited Chunk
	if spec.Fork != nil {
		if src, inherited, err = s.forkPoint(ctx, st, spec); err != nil {
			return nil, Tail{}, false, err
		}
	}
	st.ID = s.newID(ctx)
	st.Touched = s.now().UnixMilli()
	if t, err = s.write(ctx, st, spec, inherited, data, messages); err != nil {
		return nil, Tail{}, false, err
	}
	if err := s.put(ctx, st); err != nil {
		if errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			// Another PUT created it meanwhile: this one's frames stay
			// unnamed, and the stream is the other's.
			return s.Create(ctx, tenant, path, spec, data, messages)
		}
		return nil, Tail{}, false, fmt.Errorf("durable: create record: %w", err)
	}
	if src != nil {
		if err := s.countForks(ctx, src, 1); err != nil {
			return nil, Tail{}, false, err
		}
	}
	return st, t, true, nil
}

// existing answers a PUT to a stream that exists: itself if spec
// matches its configuration, else ErrConflict.
func (s *Store) existing(ctx context.Context, st *Stream, spec Spec) (*Stream, Tail, bool, error) {
	if st.Deleted {
		return nil, Tail{}, false, ErrConflict
	}
	t, err := s.TailOf(ctx, st)
	if err != nil {
		return nil, Tail{}, false, err
	}
	same := t.Closed == spec.Closed && equalPtr(st.TTL, spec.TTL) && equalTime(st.ExpiresAt, spec.ExpiresAt)
	if spec.Fork == nil {
		same = same && st.Fork == nil && MediaType(spec.ContentType) == MediaType(st.ContentType)
	} else {
		f := st.Fork
		same = same && f != nil && f.Source == spec.Fork.Source && f.SubOffset == spec.Fork.SubOffset &&
			(spec.Fork.Offset == nil || *spec.Fork.Offset == f.Offset) &&
			(spec.ContentType == "" || MediaType(spec.ContentType) == MediaType(st.ContentType))
	}
	if !same {
		return nil, Tail{}, false, ErrConflict
	}
	return st, t, false, nil
}

func equalPtr(a, b *int64) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

func equalTime(a, b *time.Time) bool { return (a == nil) == (b == nil) && (a == nil || a.Equal(*b)) }

// forkPoint checks a fork against its source and completes st's record:
// the content type, expiry and fork point it inherits. It returns the
// source and the part of the source's next chunk the sub-offset takes.
func (s *Store) forkPoint(ctx context.Context, st *Stream, spec Spec) (*Stream, Chunk, error) {
	fs := spec.Fork
	src, err := s.Open(ctx, st.Tenant, fs.Source)
	if errors.Is(err, ErrGone) {
		return nil, Chunk{}, ErrConflict
	}
	if err != nil {
		return nil, Chunk{}, err
	}
	if spec.ContentType == "" {
		st.ContentType = src.ContentType
	} else if MediaType(spec.ContentType) != MediaType(src.ContentType) {
		return nil, Chunk{}, ErrConflict
	}
	if spec.TTL == nil && spec.ExpiresAt == nil {
		st.TTL, st.ExpiresAt = src.TTL, src.ExpiresAt
	}
	t, err := s.TailOf(ctx, src)
	if err != nil {
		return nil, Chunk{}, err
	}
	at := t.Offset
	if fs.Offset != nil {
		if fs.Offset.Seq > t.Offset.Seq {
			return nil, Chunk{}, ErrBadForkOffset
		}
		at = *fs.Offset
	}
	st.Fork = &Fork{Source: fs.Source, SourceID: src.ID, Offset: at, SubOffset: fs.SubOffset}
	if fs.SubOffset == 0 {
		return src, Chunk{}, nil
	}
	var next Chunk
	found := false
	if err := s.read(ctx, src, at, min(at.Seq+1, t.Offset.Seq), 1, func(c Chunk) bool { next, found = c, true; return false }); err != nil {
		return nil, Chunk{}, err
	}
	if !found {
		return nil, Chunk{}, ErrBadForkOffset
	}
	part, ok := prefix(next, fs.SubOffset, src.isJSON())
	if !ok {
		return nil, Chunk{}, ErrBadForkOffset
	}
	return src, part, nil
}

// prefix is the first n bytes of c, or its first n messages for a JSON
// stream; ok is false when c has fewer.
func prefix(c Chunk, n int64, isJSON bool) (Chunk, bool) {
	if !isJSON {
		if n > int64(len(c.Data)) {
			return Chunk{}, false
		}
		return Chunk{Data: c.Data[:n]}, true
	}
	if n > int64(c.Messages) {
		return Chunk{}, false
	}
	dec := json.NewDecoder(bytes.NewReader(append(append([]byte{'['}, c.Data...), ']')))
	if _, err := dec.Token(); err != nil {
		return Chunk{}, false
	}
	var msgs [][]byte
	for range n {
		var m json.RawMessage
		if err := dec.Decode(&m); err != nil {
			return Chunk{}, false
		}
		msgs = append(msgs, m)
	}
	return Chunk{Data: bytes.Join(msgs, []byte{','}), Messages: int(n)}, true
}

// write stores a new stream's frames: its claim (with the tenant, and a
// fork's point), the part of its source's next chunk a fork takes, the
// initial data, and the end frame of a stream created closed.
func (s *Store) write(ctx context.Context, st *Stream, spec Spec, inherited Chunk, data []byte, messages int) (Tail, error) {
	var base wire.Offset
	claimState := state{}
	if st.Fork != nil {
		base = st.Fork.Offset
		claimState.Tail = &base
	}
	claim := wire.Frame{Kind: wire.KindClaim, Tenant: st.Tenant, Created: s.now().Unix(), Model: claimModel, Durable: claimState.encode()}
	w := chunklog.NewWriter(s.js, s.reader, st.ID, 0, base.Seq)
	c, err := w.Append(ctx, claim)
	if err != nil {
		return Tail{}, fmt.Errorf("durable: create %s: %w", st.ID, err)
	}
	tail := base
	if st.Fork == nil {
		tail = wire.Offset{JSSeq: c.JSSeq}
	}
	for _, d := range []Chunk{inherited, {Data: data, Messages: messages}} {
		if len(d.Data) == 0 {
			continue
		}
		c, err := w.Append(ctx, dataFrame(d.Data, state{Messages: d.Messages}))
		if err != nil {
			return Tail{}, fmt.Errorf("durable: create %s: %w", st.ID, err)
		}
		tail = wire.Offset{Seq: c.Seq, JSSeq: c.JSSeq}
	}
	if spec.Closed {
		if _, err := w.Append(ctx, endFrame(state{}, tail, nil)); err != nil {
			return Tail{}, fmt.Errorf("durable: create %s: %w", st.ID, err)
		}
	}
	return Tail{Offset: tail, Closed: spec.Closed}, nil
}

// countForks adds n to st's count of forks, re-reading the record when
// another writer changed it.
func (s *Store) countForks(ctx context.Context, st *Stream, n int) error {
	for range appendTries {
		cur, found, err := s.get(ctx, st.Key())
		if err != nil || !found {
			return err
		}
		cur.Forks += n
		if cur.Deleted && cur.Forks <= 0 {
			return s.remove(ctx, cur)
		}
		err = s.put(ctx, cur)
		if !errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			return err
		}
	}
	return fmt.Errorf("durable: count forks of %s: contended", st.Path)
}
