package chunklog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"

	"github.com/relaydev/relay/relay/protocol"
)

// Entry is one stored frame and where it is stored.
type Entry struct {
	JSSeq uint64
	Frame protocol.Frame
}

// Reader reads stream history with batched direct gets.
//
// All of a Reader's reads share one reply subscription, a wildcard over an
// inbox prefix of its own, and each read gets a token under it and a
// channel just large enough for its batch: a subscription per read would
// cost a SUB and an UNSUB on the server and, in nats.go, a 65,536-slot
// channel (512 KiB) for as long as the read lasts.
type Reader struct {
	nc *nats.Conn
	// apiPrefix is "$JS.API." or a domain's "$JS.<domain>.API.".
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
}

// NewReader returns a reader over nc. apiPrefix is empty for the local
// JetStream domain.
func NewReader(nc *nats.Conn, apiPrefix string) *Reader {
	if apiPrefix == "" {
		apiPrefix = "$JS.API."
	}
	return &Reader{nc: nc, apiPrefix: apiPrefix, page: 256, reads: map[string]chan *nats.Msg{}}
}

type directGet struct {
	Seq     uint64 `json:"seq"`
	NextFor string `json:"next_by_subj"`
	Batch   int    `json:"batch"`
}

// Read calls fn for every frame of the stream stored after JetStream
// sequence after, in order, until the frames stored when the read started
// are exhausted or fn returns an error. It returns the JetStream sequence
// of the last frame passed to fn (or after, when there was none).
func (r *Reader) Read(ctx context.Context, streamID string, after uint64, fn func(Entry) error) (uint64, error) {
	return r.ReadUpTo(ctx, streamID, after, 0, fn)
}

// ReadUpTo is Read that stops after limit frames (no limit when limit is
// 0 or less). It asks the server for no more than that, so that a caller
// that wants a few frames does not make it look for a whole page, and
// waits only for them.
func (r *Reader) ReadUpTo(ctx context.Context, streamID string, after uint64, limit int, fn func(Entry) error) (uint64, error) {
	subject := protocol.ChunkSubject(streamID)
	bounded := limit > 0
	for {
		batch := r.page
		if bounded {
			batch = min(batch, limit)
		}
		n, last, more, err := r.readPage(ctx, subject, after, batch, fn)
		if err != nil {
			return last, err
		}
		after = last
		limit -= n
		if n == 0 || !more || bounded && limit <= 0 {
			return after, nil
		}
	}
}

// readPage reads up to batch frames; more reports that the server has
// further matching messages.
func (r *Reader) readPage(ctx context.Context, subject string, after uint64, batch int, fn func(Entry) error) (n int, last uint64, more bool, err error) {
	last = after
	req, _ := json.Marshal(directGet{Seq: after + 1, NextFor: subject, Batch: batch})
	// The server sends at most batch messages and one status: the
	// subscription's handler never blocks on this channel.
	replies := make(chan *nats.Msg, batch+1)
	reply, err := r.register(replies)
	if err != nil {
		return 0, last, false, err
	}
	defer r.unregister(reply)
	if err := r.nc.PublishRequest(r.apiPrefix+"DIRECT.GET."+protocol.ChunkStream, reply, req); err != nil {
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
			pending, _ := strconv.ParseUint(msg.Header.Get(protocol.HeaderNumPending), 10, 64)
			return n, last, pending > 0, nil
		default:
			return n, last, false, fmt.Errorf("chunklog: direct get %s: status %s %s", subject, status, msg.Header.Get("Description"))
		}
		seq, err := strconv.ParseUint(msg.Header.Get(protocol.HeaderSequence), 10, 64)
		if err != nil {
			return n, last, false, fmt.Errorf("chunklog: direct get %s: bad sequence header: %w", subject, err)
		}
		frame, err := protocol.DecodeFrame(msg.Data)
		if err != nil {
			return n, last, false, fmt.Errorf("chunklog: seq %d: %w", seq, err)
		}
		if err := fn(Entry{JSSeq: seq, Frame: frame}); err != nil {
			return n, last, false, err
		}
		n++
		last = seq
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
	req, _ := json.Marshal(struct {
		LastFor string `json:"last_by_subj"`
	}{protocol.ChunkSubject(streamID)})
	msg, err := r.nc.RequestWithContext(ctx, r.apiPrefix+"DIRECT.GET."+protocol.ChunkStream, req)
	if err != nil {
		return 0, fmt.Errorf("chunklog: last of %s: %w", streamID, err)
	}
	switch status := msg.Header.Get("Status"); status {
	case "":
	case "404":
		return 0, nil
	default:
		return 0, fmt.Errorf("chunklog: last of %s: status %s %s", streamID, status, msg.Header.Get("Description"))
	}
	seq, err := strconv.ParseUint(msg.Header.Get(protocol.HeaderSequence), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("chunklog: last of %s: bad sequence header: %w", streamID, err)
	}
	return seq, nil
}

// ErrNoFrame is returned by At when no frame is stored at the sequence.
var ErrNoFrame = errors.New("chunklog: no frame at that sequence")

// At returns the frame stored at JetStream sequence seq, and the subject it
// is stored under, so a cursor can be checked against its stream.
func (r *Reader) At(ctx context.Context, seq uint64) (string, protocol.Frame, error) {
	req, _ := json.Marshal(struct {
		Seq uint64 `json:"seq"`
	}{seq})
	msg, err := r.nc.RequestWithContext(ctx, r.apiPrefix+"DIRECT.GET."+protocol.ChunkStream, req)
	if err != nil {
		return "", protocol.Frame{}, fmt.Errorf("chunklog: get %d: %w", seq, err)
	}
	switch status := msg.Header.Get("Status"); status {
	case "":
	case "404":
		return "", protocol.Frame{}, ErrNoFrame
	default:
		return "", protocol.Frame{}, fmt.Errorf("chunklog: get %d: status %s %s", seq, status, msg.Header.Get("Description"))
	}
	frame, err := protocol.DecodeFrame(msg.Data)
	if err != nil {
		return "", protocol.Frame{}, err
	}
	return msg.Header.Get(protocol.HeaderSubject), frame, nil
}
