package chunklog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"

	"github.com/relaydev/relay/relay/protocol"
)

// Entry is one stored frame and where it is stored.
type Entry struct {
	JSSeq uint64
	Frame protocol.Frame
}

// Reader reads stream history with batched direct gets.
type Reader struct {
	nc *nats.Conn
	// apiPrefix is "$JS.API." or a domain's "$JS.<domain>.API.".
	apiPrefix string
	// page is the batch size of one direct get.
	page int
}

// NewReader returns a reader over nc. apiPrefix is empty for the local
// JetStream domain.
func NewReader(nc *nats.Conn, apiPrefix string) *Reader {
	if apiPrefix == "" {
		apiPrefix = "$JS.API."
	}
	return &Reader{nc: nc, apiPrefix: apiPrefix, page: 256}
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
	subject := protocol.ChunkSubject(streamID)
	for {
		n, last, more, err := r.readPage(ctx, subject, after, fn)
		if err != nil {
			return last, err
		}
		after = last
		if n == 0 || !more {
			return after, nil
		}
	}
}

// readPage reads up to one page; more reports that the server has further
// matching messages.
func (r *Reader) readPage(ctx context.Context, subject string, after uint64, fn func(Entry) error) (n int, last uint64, more bool, err error) {
	last = after
	req, _ := json.Marshal(directGet{Seq: after + 1, NextFor: subject, Batch: r.page})
	inbox := r.nc.NewRespInbox()
	sub, err := r.nc.SubscribeSync(inbox)
	if err != nil {
		return 0, last, false, fmt.Errorf("chunklog: subscribe: %w", err)
	}
	defer sub.Unsubscribe()
	if err := r.nc.PublishRequest(r.apiPrefix+"DIRECT.GET."+protocol.ChunkStream, inbox, req); err != nil {
		return 0, last, false, fmt.Errorf("chunklog: direct get: %w", err)
	}
	for {
		msg, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			return n, last, false, fmt.Errorf("chunklog: direct get %s: %w", subject, err)
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
