package chunklog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/relay/wire"
)

// ErrFenced is returned by Append when another writer extended the stream:
// the caller no longer owns it and must abandon it without acking.
var ErrFenced = errors.New("chunklog: stream taken over by another writer")

// Writer appends frames to one stream, each chained on the one before, so
// that it fails as soon as another writer appended anything.
type Writer struct {
	pub      *publisher
	reader   *Reader
	streamID string
	at       place
	last     uint64 // JetStream sequence of the stream's last frame
	seq      uint64 // per-stream sequence of the last chunk
	// commit, when set, groups the appends with other writers' (commit.go);
	// p is this writer's place in it.
	commit *Committer
	p      pending
}

// NewWriter returns a writer that continues after the frame stored at
// JetStream sequence last (0 for an empty stream), whose last chunk has
// sequence seq. It publishes on js's connection (see Conn).
func NewWriter(js Conn, reader *Reader, streamID string, last, seq uint64) *Writer {
	at := placeOf(streamID)
	return &Writer{pub: newPublisher(js.Conn(), at.subject), reader: reader, streamID: streamID, at: at, last: last, seq: seq}
}

// Seq is the per-stream sequence of the last chunk appended.
func (w *Writer) Seq() uint64 { return w.seq }

// Append stores f after the last frame. Chunks and the end frame get the
// next per-stream sequence (so a client sees events 1.N+1, the last one
// terminal). It returns the frame's cursor.
func (w *Writer) Append(ctx context.Context, f wire.Frame) (wire.Cursor, error) {
	if f.Kind != wire.KindClaim {
		f.Seq = w.seq + 1
	}
	data := f.Encode()
	alone := f.Kind == wire.KindClaim || f.Seq == 1
	jsSeq, err := w.store(ctx, data, alone)
	for try := 0; inProcess(err) && try < inProcessTries && ctx.Err() == nil; try++ {
		// The subject's previous message, stored but not yet cleared by
		// the leader (it answers a moment before), or another writer's in
		// flight: a moment tells which.
		pause(ctx, time.Millisecond<<try)
		jsSeq, err = w.store(ctx, data, alone)
	}
	switch {
	case err == nil:
		w.advance(f, jsSeq)
	case errors.Is(err, jetstream.ErrStreamNotFound):
		return wire.Cursor{}, fmt.Errorf("chunklog: append: %w", err)
	case isWrongLastSequence(err):
		// Either another writer appended, or our own earlier attempt of this
		// very frame was stored and only its ack was lost (a timeout across
		// a server restart). Only the stored bytes can tell.
		seq, ok := w.storedAfter(ctx, data)
		if !ok {
			return wire.Cursor{}, ErrFenced
		}
		w.advance(f, seq)
	default:
		return wire.Cursor{}, fmt.Errorf("chunklog: append to %s: %w", w.at.subject, err)
	}
	return wire.Cursor{Seq: w.seq, JSSeq: w.last}, nil
}

// store sends data after w.last, with other writers' appends unless alone
// is set, and returns its sequence. A batch refused for another stream's
// fence is sent again; one refused for this stream's returns the
// refusal, as a single append would.
func (w *Writer) store(ctx context.Context, data []byte, alone bool) (uint64, error) {
	if w.commit == nil || alone {
		return w.pub.publish(ctx, data, w.last)
	}
	if w.p.done == nil {
		w.p = pending{pub: w.pub, subject: w.at.subject, partition: wire.Partition(w.streamID), done: make(chan outcome, 1)}
	}
	w.p.data, w.p.last, w.p.refusals = data, w.last, 0
	for {
		o := w.commit.append(ctx, &w.p)
		var r refused
		switch {
		case errors.Is(o.err, errAlone):
			return w.pub.publish(ctx, data, w.last)
		case !errors.As(o.err, &r):
			return o.seq, o.err
		}
		moved, err := w.moved(ctx)
		switch {
		case err != nil:
			return 0, err
		case moved:
			return 0, r.err
		case w.p.refusals >= refusedTries:
			// Not this stream's fence, but no batch went through: a
			// failure to retry, not a takeover.
			return 0, fmt.Errorf("chunklog: append to %s: %d batches refused: %v", w.at.subject, w.p.refusals, r.err)
		}
		w.p.refusals++
	}
}

// moved reports whether the stream's leader holds a frame after w.last.
func (w *Writer) moved(ctx context.Context) (bool, error) {
	m, found, err := LeaderGet(ctx, w.pub.nc, w.reader.apiPrefix, w.at.stream, LeaderQuery{LastFor: w.at.subject})
	if err != nil {
		return false, err
	}
	return found && m.Seq != w.last, nil
}

func (w *Writer) advance(f wire.Frame, jsSeq uint64) {
	w.last = jsSeq
	if f.Kind != wire.KindClaim {
		w.seq = f.Seq
	}
}

// storedAfter reports whether the only frame stored after w.last is data.
func (w *Writer) storedAfter(ctx context.Context, data []byte) (uint64, bool) {
	var found []Entry
	_, err := w.reader.Read(ctx, w.streamID, w.last, func(e Entry) error {
		found = append(found, e)
		return nil
	})
	if err != nil || len(found) != 1 || !bytes.Equal(found[0].Frame.Encode(), data) {
		return 0, false
	}
	return found[0].JSSeq, true
}

// inProcessTries bounds the tries of an append refused because its
// subject had a message in process: 31 ms in all.
const inProcessTries = 5

// pause waits d or until ctx ends.
func pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

func isWrongLastSequence(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence
}
