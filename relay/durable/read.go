package durable

import (
	"context"
	"errors"
	"math"

	"github.com/relaydev/relay/relay/chunklog"
	"github.com/relaydev/relay/relay/wire"
)

// Chunk is one append's data as read: its bytes (a JSON stream's
// messages joined by commas, Messages of them) and the offset after it.
type Chunk struct {
	Data     []byte
	Messages int
	At       wire.Offset
}

// Page is what a read returns: the chunks after the offset asked for, the
// offset to read on from, whether they reach the tail, and whether the
// stream is closed there.
type Page struct {
	Chunks   []Chunk
	Next     wire.Offset
	UpToDate bool
	Closed   bool
}

// Start is the offset before a stream's first data (the protocol's -1).
var Start = wire.Offset{}

// errStop ends a read of the log early.
var errStop = errors.New("durable: read stopped")

// Read returns the chunks after from, at least one if there is any and
// no more than about maxBytes, a fork's inherited ones first. It returns
// ErrGone when frames after from are past the log's retention.
func (s *Store) Read(ctx context.Context, st *Stream, from wire.Offset, maxBytes int) (Page, error) {
	t, err := s.TailOf(ctx, st)
	if err != nil {
		return Page{}, err
	}
	p := Page{Next: from}
	size := 0
	full := false
	err = s.read(ctx, st, from, math.MaxUint64, func(c Chunk) bool {
		if len(p.Chunks) > 0 && size+len(c.Data) > maxBytes {
			full = true
			return false
		}
		p.Chunks = append(p.Chunks, c)
		p.Next = c.At
		size += len(c.Data)
		return true
	})
	if err != nil {
		return Page{}, err
	}
	if p.Next == Start {
		p.Next = t.Offset
	}
	p.UpToDate = !full && p.Next.Seq >= t.Offset.Seq
	p.Closed = p.UpToDate && t.Closed
	return p, nil
}

// read passes emit the chunks of st after from up to sequence limit:
// for a fork, its source's up to the fork point, then its own. It stops
// where emit returns false.
func (s *Store) read(ctx context.Context, st *Stream, from wire.Offset, limit uint64, emit func(Chunk) bool) error {
	var base wire.Offset
	if st.Fork != nil {
		base = st.Fork.Offset
		if from.Seq < base.Seq {
			src, found, err := s.get(ctx, keyOf(st.Tenant, st.Fork.Source))
			if err != nil {
				return err
			}
			if !found || src.ID != st.Fork.SourceID {
				return ErrGone
			}
			more := true
			err = s.read(ctx, src, from, min(limit, base.Seq), func(c Chunk) bool {
				more = emit(c)
				return more
			})
			if err != nil || !more {
				return err
			}
		}
	}
	after, expect := from.JSSeq, from.Seq+1
	if from.Seq <= base.Seq {
		after, expect = 0, base.Seq+1
	}
	_, err := s.reader.Read(ctx, st.ID, after, func(e chunklog.Entry) error {
		f := e.Frame
		switch {
		case f.Kind == wire.KindClaim:
			return nil
		case f.Kind == wire.KindEnd || f.Seq > limit:
			return errStop
		case f.Seq != expect:
			return ErrGone
		}
		expect++
		ds, err := stateOf(f)
		if err != nil {
			return err
		}
		if !emit(Chunk{Data: chunkData(f), Messages: ds.Messages, At: wire.Offset{Seq: f.Seq, JSSeq: e.JSSeq}}) {
			return errStop
		}
		return nil
	})
	if errors.Is(err, errStop) {
		return nil
	}
	return err
}
