package upstream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/relaydev/relay/relay/dialect/chat"
	"io"
	"sync"
)

// Stream is an open streaming chat completion. Next is for one goroutine;
// Close may be called from any goroutine, also while Next blocks.
type Stream struct {
	provider string
	// ctx is the request's context, kept because its cause tells why a
	// body read failed: stall, Close, or the caller.
	ctx    context.Context
	cancel context.CancelCauseFunc
	wd     *watchdog
	body   io.Closer
	events *EventReader
	// dec reads the events of a dialect other than chat completions; nil
	// for chat chunks.
	dec eventDecoder

	closeOnce sync.Once
	closeErr  error

	finish  string
	stopSeq string // the stop sequence that ended the answer, if said
	sawDone bool
	err     error // sticky result of Next
}

// doneData is the sentinel event data that ends an OpenAI stream.
var doneData = []byte("[DONE]")

// Next returns the next chunk's chat.Delta. Comments and events without a chunk
// are skipped (they still reset the stall bound).
//
// It returns io.EOF when the stream is complete: after "data: [DONE]", or
// when anything but Close or the caller's ctx ends the stream after a chunk
// carried a finish_reason. The answer is whole then, only [DONE] or a
// trailing usage chunk is missing or unreadable; SawDone tells which end it
// was. If the body ends before any finish_reason, the error wraps
// ErrTruncated (and the transport error, if any). Other errors wrap
// ErrStalled, ErrMalformed, *chat.Error (an error payload mid-stream),
// ErrClosed or the caller's ctx.Err(). Errors, and io.EOF, are sticky.
func (s *Stream) Next() (chat.Delta, error) {
	var d chat.Delta
	err := s.NextInto(&d)
	return d, err
}

// NextInto is Next, the chat.Delta read into d; d is left as it was on an
// error. A worker's job waits in it for as long as an answer streams, so
// its own frame holds only the event it waits for: what is done with the
// event is take's (relay/worker/stack.go).
func (s *Stream) NextInto(d *chat.Delta) error {
	if s.err != nil {
		return s.err
	}
	for {
		if err := s.ctx.Err(); err != nil {
			// Closed, stalled or cancelled: buffered events are not
			// delivered after the request ended.
			return s.end(s.readErr(err))
		}
		ev, err := s.events.next()
		if err != nil {
			return s.end(s.readErr(err))
		}
		if ev.Comment {
			continue
		}
		if err := s.take(&ev, d); !errors.Is(err, chat.ErrNoDelta) {
			if err == nil && d.HasContent() {
				s.wd.progress()
			}
			return err
		}
	}
}

// take decodes ev into d for NextInto; chat.ErrNoDelta says that ev held no chunk.
func (s *Stream) take(ev *Event, d *chat.Delta) error {
	if s.dec != nil {
		return s.decodeInto(ev, d)
	}
	if bytes.Equal(bytes.TrimSpace(ev.Data), doneData) {
		s.sawDone = true
		return s.end(io.EOF)
	}
	err := chat.ParseChunkInto(ev.Data, d)
	if err != nil && s.finish != "" {
		return s.end(io.EOF)
	}
	if err != nil {
		return s.end(fmt.Errorf("upstream: %s: %w", s.provider, err))
	}
	if d.FinishReason != "" {
		s.finish = d.FinishReason
	}
	return nil
}

// decodeInto is take for a dialect's events: decode, into d. The chat.Delta
// decode returns is copied in this frame, not in take's, which is on the
// stack of every chunk's parse (relay/worker/stack.go); hence noinline.
//
//go:noinline
func (s *Stream) decodeInto(ev *Event, d *chat.Delta) error {
	dd, err := s.decode(*ev)
	if err == nil {
		*d = dd
	}
	return err
}

// decode is Next for a dialect's events: an explicit end of stream counts
// as [DONE] would, and only after a finish reason.
func (s *Stream) decode(ev Event) (chat.Delta, error) {
	d, err := s.dec.Decode(ev.Event, ev.Data)
	switch {
	case errors.Is(err, io.EOF) && s.finish == "":
		return chat.Delta{}, s.end(fmt.Errorf("upstream: %s: %w", s.provider, ErrTruncated))
	case errors.Is(err, io.EOF):
		s.sawDone = true
		return chat.Delta{}, s.end(io.EOF)
	case errors.Is(err, chat.ErrNoDelta):
		return chat.Delta{}, err
	case err != nil:
		return chat.Delta{}, s.end(fmt.Errorf("upstream: %s: %w", s.provider, err))
	}
	if d.FinishReason != "" {
		s.finish, s.stopSeq = d.FinishReason, d.StopSequence
	}
	return d, nil
}

// end records the final result of Next and disarms the watchdog.
func (s *Stream) end(err error) error {
	s.err = err
	s.wd.stop()
	return err
}

// readErr maps a failure of the event reader to Next's contract.
func (s *Stream) readErr(err error) error {
	err = requestErr(s.ctx, err)
	stalled := errors.Is(err, ErrStalled)
	switch {
	case s.ctx.Err() != nil && !stalled:
		// Closed, or the caller's ctx ended: never reported as done.
	case s.finish != "":
		return io.EOF
	case stalled || errors.Is(err, ErrMalformed):
		// Said as is: the provider went silent, or sent what cannot be read.
	case errors.Is(err, io.EOF):
		err = ErrTruncated
	default:
		err = fmt.Errorf("%w: %w", ErrTruncated, err)
	}
	return fmt.Errorf("upstream: %s: %w", s.provider, err)
}

// SawDone reports whether the stream ended with "data: [DONE]". After Next
// returned io.EOF, false means the provider omitted it after finishing.
func (s *Stream) SawDone() bool { return s.sawDone }

// FinishReason returns the last finish_reason seen, "" if none.
func (s *Stream) FinishReason() string { return s.finish }

// StopSequence is the stop sequence that ended the answer, when the
// provider said which (Anthropic does); "" otherwise.
func (s *Stream) StopSequence() string { return s.stopSeq }

// Close aborts the request if it is still running and releases the
// connection. It is idempotent and returns the first Close's result.
func (s *Stream) Close() error {
	s.closeOnce.Do(func() {
		s.cancel(ErrClosed)
		s.wd.stop()
		s.closeErr = s.body.Close()
	})
	return s.closeErr
}
