package chunklog

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/relay/wire"
)

// headerPrev is the header in which every frame names the JetStream
// sequence of the frame stored before it on the same stream ("0" for the
// first): the expected-last-subject-sequence an append is chained on
// (wire "Fencing"). nats-server keeps it with the message, and a stored
// frame's value is right, since the server refused the append otherwise.
//
// Why a read follows it: every stream's frames are interleaved in one
// JetStream stream, and nats-server finds "the next message of this
// subject after sequence N" by walking the messages after N one by one,
// as many as other streams stored in between: at 10,000 streams of 1
// token/s, ten thousand messages per frame, each decoded, under the
// block's lock. A worker taking over thousands of requests after a stall
// read thousands of streams at once that way: the reads timed out, were
// retried, and kept the server too busy to answer anything else. The
// message at a sequence, and the last message of a subject, the server
// finds through its indexes at once, so a stream read backwards from its
// last frame costs one lookup per frame, however many streams run beside
// it.
const headerPrev = jetstream.ExpectedLastSubjSeqHeader

// denseGap is the mean distance, in messages of the JetStream stream,
// between a stream's frames under which Read reads forward: the server's
// walk from one frame to the next is then short, and batches read a page
// of frames in one round trip where the chain takes one per frame.
const denseGap = 64

// readBack reads the frames stored after JetStream sequence after, from
// the stream's last frame back along their headerPrev, and returns them in
// the order they were stored. ok is false when the caller should read
// forward instead: the frames lie close together (denseGap), or the chain
// breaks (a frame without headerPrev, not stored by a Writer, or one whose
// predecessor is gone, expired or discarded when the stream was full, or
// is not of the stream), where reading forward finds what is left.
//
// Each step waits for the one before, so a read takes a round trip per
// frame, where a forward read of frames far apart would cost the server a
// walk over every other stream's frames stored meanwhile.
func (r *Reader) readBack(ctx context.Context, streamID string, after uint64) (back []Entry, ok bool, err error) {
	subject := wire.ChunkSubject(streamID)
	msg, found, err := r.get(ctx, "last of "+streamID, struct {
		LastFor string `json:"last_by_subj"`
	}{subject})
	if err != nil || !found {
		return nil, true, err
	}
	last, err := entryOf(msg)
	if err != nil {
		return nil, true, fmt.Errorf("chunklog: read %s back: %w", streamID, err)
	}
	if last.JSSeq <= after {
		return nil, true, nil
	}
	if dense, err := r.dense(ctx, subject, after, last); err != nil || dense {
		return nil, !dense, err
	}
	r.backReads.Add(1)
	for {
		e, err := entryOf(msg)
		if err != nil {
			return nil, true, fmt.Errorf("chunklog: read %s back: %w", streamID, err)
		}
		if e.JSSeq <= after {
			break
		}
		back = append(back, e)
		prev, ok := prevOf(msg.Header)
		if !ok {
			return nil, false, nil
		}
		if prev <= after {
			break
		}
		if msg, ok, err = r.frameAt(ctx, subject, prev); err != nil || !ok {
			return nil, ok, err
		}
	}
	slices.Reverse(back)
	return back, true, nil
}

// dense reports whether the frames of subject after JetStream sequence
// after, up to last, lie closer together than denseGap on average. It
// reads the first of them, which the server finds at once when the read
// starts before the stream (after 0) and otherwise within one gap, and
// counts the frames between by their per-stream sequences (a claim has
// none, so the count is of the chunks and the end frame).
func (r *Reader) dense(ctx context.Context, subject string, after uint64, last Entry) (bool, error) {
	msg, found, err := r.get(ctx, "direct get "+subject, directGet{Seq: after + 1, NextFor: subject})
	if err != nil || !found {
		return false, err
	}
	first, err := entryOf(msg)
	if err != nil {
		return false, fmt.Errorf("chunklog: direct get %s: %w", subject, err)
	}
	if last.Frame.Seq <= first.Frame.Seq {
		return false, nil
	}
	return last.JSSeq-first.JSSeq < denseGap*(last.Frame.Seq-first.Frame.Seq), nil
}

// prevOf reads headerPrev; ok is false when it is missing or malformed.
func prevOf(h nats.Header) (uint64, bool) {
	v := h.Get(headerPrev)
	if v == "" {
		return 0, false
	}
	prev, err := strconv.ParseUint(v, 10, 64)
	return prev, err == nil
}

// frameAt returns the message stored at seq, which a later frame of
// subject names as its predecessor. Since it was stored, a direct get's
// miss (a replica behind its leader) is confirmed with the leader; ok is
// false when it is gone or is not of subject.
func (r *Reader) frameAt(ctx context.Context, subject string, seq uint64) (msg *nats.Msg, ok bool, err error) {
	msg, found, err := r.get(ctx, fmt.Sprintf("get %d", seq), struct {
		Seq uint64 `json:"seq"`
	}{seq})
	if err != nil {
		return nil, false, err
	}
	if !found {
		r.leaderReads.Add(1)
		m, found, err := LeaderGet(ctx, r.nc, r.apiPrefix, wire.ChunkStream, LeaderQuery{Seq: seq})
		if err != nil || !found {
			return nil, false, err
		}
		h := m.Header
		if h == nil {
			h = nats.Header{}
		}
		h.Set(wire.HeaderSequence, strconv.FormatUint(m.Seq, 10))
		h.Set(wire.HeaderSubject, m.Subject)
		msg = &nats.Msg{Subject: m.Subject, Header: h, Data: m.Data}
	}
	return msg, msg.Header.Get(wire.HeaderSubject) == subject, nil
}
