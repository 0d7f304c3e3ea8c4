package chunklog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/nats-io/nats.go"

	"github.com/relaydev/relay/relay/wire"
)

// place is where a stream's frames are stored: its partition's chunk
// stream (wire.ChunkStreamOf) and its subject there.
type place struct{ stream, subject string }

func placeOf(streamID string) place {
	return place{stream: wire.ChunkStreamOf(streamID), subject: wire.ChunkSubject(streamID)}
}

// Entry is one stored frame and where it is stored.
type Entry struct {
	JSSeq uint64
	Frame wire.Frame
}

// Reader reads stream history with direct gets: back along the frames'
// chain from the stream's last frame, or forward with plain gets for the
// first frames of a read and batched ones for the rest (see ReadUpTo), or
// batched ones only for a read that continues a long one (ReadOn).
//
// Plain gets are requests with one reply. All of a Reader's batches share
// one reply subscription, a wildcard over an inbox prefix of its own, and
// each batch gets a token under it and a channel just large enough for
// it: a subscription per batch would cost a SUB and an UNSUB on the
// server and, in nats.go, a 65,536-slot channel (512 KiB) for as long as
// the batch lasts.
type Reader struct {
	nc *nats.Conn
	// apiPrefix is "$JS.API." or a domain's "$JS.<domain>API.".
	apiPrefix string
	// page is the batch size of one direct get.
	page int

	mu sync.Mutex
	// sub receives every reply, under inbox + "." + token; nil until the
	// first read.
	sub   *nats.Subscription
	inbox string
	// reads routes replies by token to the read waiting for them.
	reads map[string]chan *nats.Msg
	token uint64

	// leaderReads counts the misses of a direct get that At confirmed
	// with the stream's leader.
	leaderReads atomic.Uint64
	// backReads counts the reads that followed the chain back (readBack).
	backReads atomic.Uint64
}

// NewReader returns a reader over nc. apiPrefix is empty for the local
// JetStream domain.
func NewReader(nc *nats.Conn, apiPrefix string) *Reader {
	if apiPrefix == "" {
		apiPrefix = "$JS.API."
	}
	return &Reader{nc: nc, apiPrefix: apiPrefix, page: 256, reads: map[string]chan *nats.Msg{}}
}

// chained is how many frames a read takes with plain direct gets before
// it reads on in batches (see ReadUpTo).
const chained = 16

// directGet is a direct get request; without Batch, the server answers
// with one message (or a 404 status).
type directGet struct {
	Seq     uint64 `json:"seq"`
	NextFor string `json:"next_by_subj"`
	Batch   int    `json:"batch,omitempty"`
}

// Read calls fn for every frame of the stream stored after JetStream
// sequence after, in order, until the frames stored when the read started
// are exhausted or fn returns an error. It returns the JetStream sequence
// of the last frame passed to fn (or after, when there was none). It
// reads as ReadUpTo does.
func (r *Reader) Read(ctx context.Context, streamID string, after uint64, fn func(Entry) error) (uint64, error) {
	return r.ReadUpTo(ctx, streamID, after, 0, fn)
}

// ReadUpTo is Read that stops after limit frames (no limit when limit is
// 0 or less).
//
// It follows the stream's frames back from its last one (readBack): the
// server finds each through an index, however many other streams' frames
// were stored in between, where a forward read makes it walk every one of
// them. It reads forward instead where the frames lie close together
// (batches then read a page per round trip), where the chain breaks, and
// when more than limit frames lie after the cursor (a deep catch-up). A
// read of one frame (limit 1: the first event of a resume waits for it)
// reads forward at once: one plain get, one round trip, where the chain
// would first look up the last frame.
//
// Forward, it reads the first frames (up to chained) one at a time, with
// plain direct gets, and only the rest with batches. For a batch, the
// server first counts the stream's frames pending after the start: it
// walks the messages of the block the start is in (tens of thousands,
// every stream's frames interleaved), holding the block's lock, and loads
// the block from disk if it is not cached, then drops it again. It answers
// a connection's requests one at a time, so what the edge asks meanwhile
// waits as long. A plain get walks only to the stream's next frame. A
// long catch-up pays the batch's fixed cost once per page, and reads on
// with ReadOn. A read of chained frames or fewer can also stop between
// frames when ctx ends, where a batch, once asked for, runs to its end on
// the server. Forward or back, it asks the server for no more than limit
// frames, and waits only for them.
func (r *Reader) ReadUpTo(ctx context.Context, streamID string, after uint64, limit int, fn func(Entry) error) (uint64, error) {
	at := placeOf(streamID)
	if limit == 1 {
		return r.readForward(ctx, at, after, limit, fn)
	}
	most := maxBack
	if limit > 0 {
		most = limit
	}
	back, fwd, err := r.readBack(ctx, streamID, after, most)
	switch {
	case err != nil:
		return after, err
	case fwd == forwardPaged:
		return r.readPages(ctx, at, after, limit, fn)
	case fwd == forwardPlain:
		return r.readForward(ctx, at, after, limit, fn)
	}
	for _, e := range back {
		if err := fn(e); err != nil {
			return after, err
		}
		after = e.JSSeq
	}
	return after, nil
}

// readForward reads up to limit frames at at after after forward:
// chained plain gets, then batches.
func (r *Reader) readForward(ctx context.Context, at place, after uint64, limit int, fn func(Entry) error) (uint64, error) {
	bounded := limit > 0
	for range chained {
		if bounded && limit <= 0 {
			return after, nil
		}
		found, err := r.readOne(ctx, at, after, func(e Entry) error {
			if err := fn(e); err != nil {
				return err
			}
			after = e.JSSeq
			return nil
		})
		if err != nil || !found {
			return after, err
		}
		limit--
	}
	if bounded && limit <= 0 {
		return after, nil
	}
	return r.readPages(ctx, at, after, limit, fn)
}

// ReadOn is ReadUpTo that reads forward in batches from the first frame.
// It is for a read that goes on where one that stopped at a limit of many
// frames left off, in a long catch-up: the stream likely has many more
// frames than the chain may be followed for, so the batch's fixed cost is
// paid anyway, and chained plain gets before it would only add as many
// round trips to every read of the catch-up.
func (r *Reader) ReadOn(ctx context.Context, streamID string, after uint64, limit int, fn func(Entry) error) (uint64, error) {
	return r.readPages(ctx, placeOf(streamID), after, limit, fn)
}

// readPages reads up to limit frames (no limit when 0 or less) in batches
// of at most a page.
func (r *Reader) readPages(ctx context.Context, at place, after uint64, limit int, fn func(Entry) error) (uint64, error) {
	bounded := limit > 0
	for {
		if bounded && limit <= 0 {
			return after, nil
		}
		batch := r.page
		if bounded {
			batch = min(batch, limit)
		}
		n, last, more, err := r.readPage(ctx, at, after, batch, fn)
		if err != nil {
			return last, err
		}
		after = last
		limit -= n
		if n == 0 || !more {
			return after, nil
		}
	}
}

// readOne passes fn the first frame stored at at after JetStream
// sequence after, and reports whether there was one.
func (r *Reader) readOne(ctx context.Context, at place, after uint64, fn func(Entry) error) (bool, error) {
	what := "direct get " + at.subject
	msg, found, err := r.get(ctx, at.stream, what, directGet{Seq: after + 1, NextFor: at.subject})
	if err != nil || !found {
		return false, err
	}
	e, err := entryOf(msg)
	if err != nil {
		return false, fmt.Errorf("chunklog: %s: %w", what, err)
	}
	return true, fn(e)
}

// entryOf decodes a direct get's reply that carries a message.
func entryOf(msg *nats.Msg) (Entry, error) {
	seq, err := strconv.ParseUint(msg.Header.Get(wire.HeaderSequence), 10, 64)
	if err != nil {
		return Entry{}, fmt.Errorf("bad sequence header: %w", err)
	}
	frame, err := wire.DecodeFrame(msg.Data)
	if err != nil {
		return Entry{}, fmt.Errorf("seq %d: %w", seq, err)
	}
	return Entry{JSSeq: seq, Frame: frame}, nil
}

// readPage reads up to batch frames; more reports that the server has
// further matching messages.
func (r *Reader) readPage(ctx context.Context, at place, after uint64, batch int, fn func(Entry) error) (n int, last uint64, more bool, err error) {
	last, subject := after, at.subject
	req, _ := json.Marshal(directGet{Seq: after + 1, NextFor: subject, Batch: batch})
	// The server sends at most batch messages and one status: the
	// subscription's handler never blocks on this channel.
	replies := make(chan *nats.Msg, batch+1)
	reply, err := r.register(replies)
	if err != nil {
		return 0, last, false, err
	}
	defer r.unregister(reply)
	if err := r.nc.PublishRequest(r.apiPrefix+"DIRECT.GET."+at.stream, reply, req); err != nil {
		return 0, last, false, fmt.Errorf("chunklog: direct get: %w", err)
	}
	for {
		var msg *nats.Msg
		select {
		case msg = <-replies:
		case <-ctx.Done():
			return n, last, false, fmt.Errorf("chunklog: direct get %s: %w", subject, context.Cause(ctx))
		}
		switch status := msg.Header.Get("Status"); status {
		case "":
		case "404":
			return n, last, false, nil
		case "204":
			pending, _ := strconv.ParseUint(msg.Header.Get(wire.HeaderNumPending), 10, 64)
			return n, last, pending > 0, nil
		default:
			return n, last, false, fmt.Errorf("chunklog: direct get %s: status %s %s", subject, status, msg.Header.Get("Description"))
		}
		e, err := entryOf(msg)
		if err != nil {
			return n, last, false, fmt.Errorf("chunklog: direct get %s: %w", subject, err)
		}
		if err := fn(e); err != nil {
			return n, last, false, err
		}
		n++
		last = e.JSSeq
	}
}

// register returns a reply subject whose messages go to replies, until
// unregister. It subscribes the Reader's inbox on first use.
func (r *Reader) register(replies chan *nats.Msg) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sub == nil {
		inbox := r.nc.NewInbox()
		sub, err := r.nc.Subscribe(inbox+".*", r.route)
		if err != nil {
			return "", fmt.Errorf("chunklog: subscribe: %w", err)
		}
		r.sub, r.inbox = sub, inbox
	}
	r.token++
	token := strconv.FormatUint(r.token, 36)
	r.reads[token] = replies
	return r.inbox + "." + token, nil
}

func (r *Reader) unregister(reply string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.reads, reply[len(r.inbox)+1:])
}

// route hands a reply to its read; replies to a read that is over (it
// stopped early, or timed out) are dropped.
func (r *Reader) route(msg *nats.Msg) {
	token := msg.Subject[strings.LastIndexByte(msg.Subject, '.')+1:]
	r.mu.Lock()
	replies := r.reads[token]
	r.mu.Unlock()
	if replies == nil {
		return
	}
	select {
	case replies <- msg:
	default:
		// More than the batch it asked for: not a direct get's reply.
	}
}

// Last returns the JetStream sequence of the last frame stored for the
// stream, 0 when there is none. The server answers it from its index of
// subjects, however many other streams' frames were stored since: a cheap
// way to learn whether a read would find anything.
func (r *Reader) Last(ctx context.Context, streamID string) (uint64, error) {
	what, at := "last of "+streamID, placeOf(streamID)
	msg, found, err := r.get(ctx, at.stream, what, struct {
		LastFor string `json:"last_by_subj"`
	}{at.subject})
	if err != nil || !found {
		return 0, err
	}
	seq, err := strconv.ParseUint(msg.Header.Get(wire.HeaderSequence), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("chunklog: %s: bad sequence header: %w", what, err)
	}
	return seq, nil
}

// LastEntry returns the last frame stored for the stream, or the zero
// Entry when the direct get finds none.
func (r *Reader) LastEntry(ctx context.Context, streamID string) (Entry, error) {
	what, at := "last of "+streamID, placeOf(streamID)
	msg, found, err := r.get(ctx, at.stream, what, struct {
		LastFor string `json:"last_by_subj"`
	}{at.subject})
	if err != nil || !found {
		return Entry{}, err
	}
	e, err := entryOf(msg)
	if err != nil {
		return Entry{}, fmt.Errorf("chunklog: %s: %w", what, err)
	}
	return e, nil
}

// First returns the stream's first frame (its first claim); found is
// false when the direct get finds none, which a replica behind its leader
// may say of a frame just stored (see LeaderGet).
func (r *Reader) First(ctx context.Context, streamID string) (e Entry, found bool, err error) {
	found, err = r.readOne(ctx, placeOf(streamID), 0, func(x Entry) error {
		e = x
		return nil
	})
	return e, found, err
}

// FirstFromLeader is First asked of the stream's leader, whose miss means
// that the stream holds no frame.
func (r *Reader) FirstFromLeader(ctx context.Context, streamID string) (e Entry, found bool, err error) {
	r.leaderReads.Add(1)
	at := placeOf(streamID)
	m, found, err := LeaderGet(ctx, r.nc, r.apiPrefix, at.stream, LeaderQuery{Seq: 1, NextFor: at.subject})
	if err != nil || !found {
		return Entry{}, false, err
	}
	frame, err := wire.DecodeFrame(m.Data)
	if err != nil {
		return Entry{}, false, fmt.Errorf("chunklog: first frame of %s: %w", streamID, err)
	}
	return Entry{JSSeq: m.Seq, Frame: frame}, true, nil
}

// LeaderReads is how many reads asked the stream's leader after a direct
// get missed (At, FirstFromLeader).
func (r *Reader) LeaderReads() uint64 { return r.leaderReads.Load() }

// ErrNoFrame is returned by At when no frame is stored at the sequence.
var ErrNoFrame = errors.New("chunklog: no frame at that sequence")

// At returns the frame stored at JetStream sequence seq in the chunk
// stream of streamID's partition, and the subject it is stored under, so a
// cursor can be checked against its stream.
//
// The caller was given seq (a cursor): the frame was stored, so a direct
// get that misses it may have reached a replica that does not hold it yet
// (see LeaderGet). Only the leader's miss is ErrNoFrame: the frame is gone.
func (r *Reader) At(ctx context.Context, streamID string, seq uint64) (string, wire.Frame, error) {
	stream := wire.ChunkStreamOf(streamID)
	msg, found, err := r.get(ctx, stream, fmt.Sprintf("get %d", seq), struct {
		Seq uint64 `json:"seq"`
	}{seq})
	if err != nil {
		return "", wire.Frame{}, err
	}
	var subject string
	var data []byte
	if found {
		subject, data = msg.Header.Get(wire.HeaderSubject), msg.Data
	} else {
		r.leaderReads.Add(1)
		m, found, err := LeaderGet(ctx, r.nc, r.apiPrefix, stream, LeaderQuery{Seq: seq})
		switch {
		case err != nil:
			return "", wire.Frame{}, err
		case !found:
			return "", wire.Frame{}, ErrNoFrame
		}
		subject, data = m.Subject, m.Data
	}
	frame, err := wire.DecodeFrame(data)
	if err != nil {
		return "", wire.Frame{}, err
	}
	return subject, frame, nil
}

// get sends one plain direct get to a chunk stream and returns its reply;
// found is false when the server has no such message. what names the
// request in errors.
func (r *Reader) get(ctx context.Context, stream, what string, req any) (msg *nats.Msg, found bool, err error) {
	body, _ := json.Marshal(req)
	msg, err = r.nc.RequestWithContext(ctx, r.apiPrefix+"DIRECT.GET."+stream, body)
	if err != nil {
		return nil, false, fmt.Errorf("chunklog: %s: %w", what, err)
	}
	switch status := msg.Header.Get("Status"); status {
	case "":
		return msg, true, nil
	case "404":
		return nil, false, nil
	default:
		return nil, false, fmt.Errorf("chunklog: %s: status %s %s", what, status, msg.Header.Get("Description"))
	}
}
