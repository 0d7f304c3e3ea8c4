package chunklog

import (
	"bytes"
	"context"
	"errors"
	"fmt"

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
	subject  string
	last     uint64 // JetStream sequence of the stream's last frame
	seq      uint64 // per-stream sequence of the last chunk
}

// NewWriter returns a writer that continues after the frame stored at
// JetStream sequence last (0 for an empty stream), whose last chunk has
// sequence seq. It publishes on js's connection (see Conn).
func NewWriter(js Conn, reader *Reader, streamID string, last, seq uint64) *Writer {
	subject := wire.ChunkSubject(streamID)
	return &Writer{pub: newPublisher(js.Conn(), subject), reader: reader, streamID: streamID, subject: subject, last: last, seq: seq}
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
	jsSeq, err := w.pub.publish(ctx, data, w.last)
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
		return wire.Cursor{}, fmt.Errorf("chunklog: append to %s: %w", w.subject, err)
	}
	return wire.Cursor{Seq: w.seq, JSSeq: w.last}, nil
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

func isWrongLastSequence(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence
}
