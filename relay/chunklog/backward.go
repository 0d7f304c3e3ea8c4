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
// between a stream's frames under which a read goes forward: the server's
// walk from one frame to the next is then short, and batches read a page
// of frames in one round trip where the chain takes one per frame.
const denseGap = 64

// judgeAfter is how many steps back a read takes before it judges, from
// the sequences it passed, how far apart the stream's frames lie. A read
// of fewer frames finishes the walk: it costs as many lookups as a
// forward read would cost plain gets, none of them a walk on the server.
const judgeAfter = 8

// maxBack bounds the frames an unbounded read (Read) follows back; a
// bounded one follows at most its limit. A read further behind reads
// forward: it is a deep catch-up, rare, where the chain would take a
// round trip per frame to deliver the first one.
const maxBack = 4096

// forward says how a read that did not follow the chain back reads on.
type forward int

const (
	// notForward: the read followed the chain; its frames are returned.
	notForward forward = iota
	// forwardPaged: the frames lie close together (denseGap) and there
	// are more than judgeAfter of them: batches from the start.
	forwardPaged
	// forwardPlain: the chain broke (a frame without headerPrev, not
	// stored by a Writer, or one whose predecessor is gone, expired or
	// discarded when the stream was full, or is not of the stream), or the
	// read is further behind than it may walk: reading forward, plain
	// gets first, finds what is left.
	forwardPlain
)

// readBack reads the frames stored after JetStream sequence after, from
// the stream's last frame back along their headerPrev, and returns them in
// the order they were stored, unless it says how to read forward instead.
// It follows no more than most frames back.
//
// Each step waits for the one before, so a read takes a round trip per
// frame, where a forward read of frames far apart would cost the server a
// walk over every other stream's frames stored meanwhile. That walk is
// what the edge's catch-ups paid when every stream was a few frames
// behind under load: at 4,000 streams of 1 token/s it was half of
// nats-server's CPU, and slower reads made more of them.
func (r *Reader) readBack(ctx context.Context, streamID string, after uint64, most int) (back []Entry, fwd forward, err error) {
	at := placeOf(streamID)
	msg, found, err := r.get(ctx, at.stream, "last of "+streamID, struct {
		LastFor string `json:"last_by_subj"`
	}{at.subject})
	if err != nil || !found {
		return nil, notForward, err
	}
	for {
		e, err := entryOf(msg)
		if err != nil {
			return nil, notForward, fmt.Errorf("chunklog: read %s back: %w", streamID, err)
		}
		if e.JSSeq <= after {
			break
		}
		back = append(back, e)
		if len(back) == judgeAfter+1 {
			if fwd := judge(back[0].JSSeq-e.JSSeq, back[0].JSSeq-after, most); fwd != notForward {
				return nil, fwd, nil
			}
		}
		if len(back) > most {
			return nil, forwardPlain, nil
		}
		prev, ok := prevOf(msg.Header)
		if !ok {
			return nil, forwardPlain, nil
		}
		if prev <= after {
			break
		}
		if msg, ok, err = r.frameAt(ctx, at, prev); err != nil || !ok {
			return nil, forwardPlain, err
		}
	}
	if len(back) > 0 {
		r.backReads.Add(1)
	}
	slices.Reverse(back)
	return back, notForward, nil
}

// judge says how a read goes on after judgeAfter steps back that spanned
// span messages, with behind messages between the stream's last frame and
// the cursor: forward in batches where the frames lie close together,
// forward where more than most frames seem to lie after the cursor (a
// walk to it would take a round trip for each, and then stop at most
// anyway), else on back.
func judge(span, behind uint64, most int) forward {
	switch {
	case span < denseGap*judgeAfter:
		return forwardPaged
	case behind*judgeAfter/span > uint64(most):
		return forwardPlain
	}
	return notForward
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

// frameAt returns the message stored at seq, which a later frame stored
// at at names as its predecessor. Since it was stored, a direct get's
// miss (a replica behind its leader) is confirmed with the leader; ok is
// false when it is gone or is not of at's subject.
func (r *Reader) frameAt(ctx context.Context, at place, seq uint64) (msg *nats.Msg, ok bool, err error) {
	msg, found, err := r.get(ctx, at.stream, fmt.Sprintf("get %d", seq), struct {
		Seq uint64 `json:"seq"`
	}{seq})
	if err != nil {
		return nil, false, err
	}
	if !found {
		r.leaderReads.Add(1)
		m, found, err := LeaderGet(ctx, r.nc, r.apiPrefix, at.stream, LeaderQuery{Seq: seq})
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
	return msg, msg.Header.Get(wire.HeaderSubject) == at.subject, nil
}
