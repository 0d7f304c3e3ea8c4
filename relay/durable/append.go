package durable

import (
	"context"
	"errors"
	"fmt"

	"github.com/relaydev/relay/relay/chunklog"
	"github.com/relaydev/relay/relay/wire"
)

// Append is one POST: its data (for a JSON stream, its messages joined
// by commas, Messages of them), whether it closes the stream, and its
// optional Stream-Seq and producer.
type Append struct {
	Data      []byte
	Messages  int
	Close     bool
	StreamSeq string
	Producer  *Producer
	// stored: an earlier try stored the data; the closure is left.
	stored bool
}

// Result is an append's outcome: the stream's tail after it, whether
// the stream is closed, and for a producer's append whether it was a
// duplicate and the producer's highest accepted sequence.
type Result struct {
	Tail        wire.Offset
	Closed      bool
	Duplicate   bool
	ProducerSeq uint64
}

// appendTries bounds how often an append reads the stream's state again
// after another append came first.
const appendTries = 64

// Append stores a's data (and closure) after the stream's last frame,
// checked against the state that frame carries. It returns a
// *ClosedError, ErrSeqConflict or a *ProducerError for a refused append.
func (s *Store) Append(ctx context.Context, st *Stream, a Append) (Result, error) {
	for range appendTries {
		res, err := s.appendOnce(ctx, st.ID, &a)
		if !errors.Is(err, chunklog.ErrFenced) {
			return res, err
		}
	}
	return Result{}, fmt.Errorf("durable: append to %s: %d appends came first", st.ID, appendTries)
}

// appendOnce is one try of Append; chunklog.ErrFenced means another
// append came first. Once a's data is stored, a is changed into the
// closure alone, which is what a further try has left to do.
func (s *Store) appendOnce(ctx context.Context, id string, a *Append) (Result, error) {
	t, err := s.tailOf(ctx, id)
	if err != nil {
		return Result{}, err
	}
	if t.Closed {
		return closedAppend(t, a)
	}
	if a.Producer != nil && !a.stored {
		switch v, highest := t.state.check(*a.Producer); v {
		case Accept:
		case Duplicate:
			return Result{Tail: t.Offset, Duplicate: true, ProducerSeq: highest}, nil
		default:
			cur := t.state.Producers[a.Producer.ID]
			return Result{}, &ProducerError{Verdict: v, Epoch: cur.Epoch, Expected: cur.Seq + 1, Received: a.Producer.Seq}
		}
	}
	if a.StreamSeq != "" && t.state.StreamSeq != "" && a.StreamSeq <= t.state.StreamSeq {
		return Result{}, ErrSeqConflict
	}
	next := t.state.next(a.Producer, a.StreamSeq)
	next.Append = newAppendID()
	w := chunklog.NewWriter(s.js, s.reader, id, t.last, t.Offset.Seq)
	tail := t.Offset
	if len(a.Data) > 0 {
		f := dataFrame(a.Data, state{Producers: next.Producers, StreamSeq: next.StreamSeq, Messages: a.Messages, Append: next.Append})
		c, err := w.Append(ctx, f)
		if err != nil {
			return Result{}, err
		}
		tail = wire.Offset{Seq: c.Seq, JSSeq: c.JSSeq}
		a.Data, a.Messages, a.StreamSeq, a.stored = nil, 0, "", true
	}
	res := Result{Tail: tail}
	if a.Producer != nil {
		res.ProducerSeq = a.Producer.Seq
	}
	if a.Close {
		if _, err := w.Append(ctx, endFrame(next, tail, a.Producer)); err != nil {
			return Result{}, err
		}
		res.Closed = true
	}
	return res, nil
}

// closedAppend answers an append to a closed stream: a retry of the
// append that closed it is a duplicate, a close alone succeeds again, a
// producer of a stale epoch is fenced as on an open stream; anything else
// is refused.
func closedAppend(t Tail, a *Append) (Result, error) {
	res := Result{Tail: t.Offset, Closed: true}
	if p := a.Producer; p != nil {
		if c := t.state.Closer; c != nil && *c == *p {
			res.Duplicate, res.ProducerSeq = true, p.Seq
			return res, nil
		}
		if v, _ := t.state.check(*p); v == StaleEpoch {
			return Result{}, &ProducerError{Verdict: v, Epoch: t.state.Producers[p.ID].Epoch, Received: p.Seq}
		}
	}
	if a.Close && len(a.Data) == 0 {
		return res, nil
	}
	return Result{}, &ClosedError{Tail: t.Offset}
}
