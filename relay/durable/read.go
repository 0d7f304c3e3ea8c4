package durable

import (
	"context"
	"errors"
	"fmt"

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
// no more than maxChunks or about maxBytes, a fork's inherited ones
// first. It returns ErrGone when frames after from are past the log's
// retention.
//
// It reads up to the tail the stream's leader knows, so a read sees every
// append acknowledged before it, on any edge, whatever replica serves it.
func (s *Store) Read(ctx context.Context, st *Stream, from wire.Offset, maxBytes, maxChunks int) (Page, error) {
	t, err := s.TailOf(ctx, st)
	if err != nil {
		return Page{}, err
	}
	p := Page{Next: from}
	size := 0
	err = s.read(ctx, st, from, t.Offset.Seq, maxChunks, func(c Chunk) bool {
		if len(p.Chunks) > 0 && size+len(c.Data) > maxBytes {
			return false
		}
		p.Chunks = append(p.Chunks, c)
		p.Next = c.At
		size += len(c.Data)
		return len(p.Chunks) < maxChunks
	})
	if err != nil {
		return Page{}, err
	}
	if p.Next == Start {
		p.Next = t.Offset
	}
	p.UpToDate = p.Next.Seq >= t.Offset.Seq
	p.Closed = p.UpToDate && t.Closed
	return p, nil
}

// read passes emit the chunks of st after from up to sequence upTo, which
// the caller knows are stored (a tail or a fork point the leader gave):
// for a fork, its source's up to the fork point, then its own. It stops
// where emit returns false, which it does by the limit-th chunk: no more
// frames than that are asked of the log at once.
//
// The frames are read with direct gets, which any replica answers; what a
// replica does not hold yet of them is read from the stream's leader, so a
// read is never short of what was acknowledged. A frame the leader lacks
// too is past the log's retention: ErrGone.
func (s *Store) read(ctx context.Context, st *Stream, from wire.Offset, upTo uint64, limit int, emit func(Chunk) bool) error {
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
			err = s.read(ctx, src, from, min(upTo, base.Seq), limit, func(c Chunk) bool {
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
	if expect > upTo {
		return nil
	}
	visit := func(e chunklog.Entry) error {
		f := e.Frame
		switch {
		case f.Kind == wire.KindClaim:
			after = e.JSSeq
			return nil
		case f.Kind == wire.KindEnd || f.Seq > upTo:
			return errStop
		case f.Seq != expect:
			return ErrGone
		}
		ds, err := stateOf(f)
		if err != nil {
			return err
		}
		after = e.JSSeq
		expect++
		if !emit(Chunk{Data: chunkData(f), Messages: ds.Messages, At: wire.Offset{Seq: f.Seq, JSSeq: e.JSSeq}}) || expect > upTo {
			return errStop
		}
		return nil
	}
	// A stream's claim is a frame too: one more when the read starts
	// before it.
	frames := limit
	if after == 0 {
		frames++
	}
	_, err := s.reader.ReadUpTo(ctx, st.ID, after, frames, visit)
	for err == nil {
		err = s.readFromLeader(ctx, st.ID, after, visit)
	}
	if errors.Is(err, errStop) {
		return nil
	}
	return err
}

// readFromLeader passes visit the first frame of stream id stored after
// JetStream sequence after, asked of the stream's leader; it is ErrGone
// when there is none.
func (s *Store) readFromLeader(ctx context.Context, id string, after uint64, visit func(chunklog.Entry) error) error {
	m, found, err := s.leaderGet(ctx, wire.ChunkStreamOf(id), chunklog.LeaderQuery{Seq: after + 1, NextFor: wire.ChunkSubject(id)})
	if err != nil {
		return fmt.Errorf("durable: read %s: %w", id, err)
	}
	if !found {
		return ErrGone
	}
	f, err := wire.DecodeFrame(m.Data)
	if err != nil {
		return fmt.Errorf("durable: read %s: %w", id, err)
	}
	return visit(chunklog.Entry{JSSeq: m.Seq, Frame: f})
}
