package upstream

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// DefaultMaxEventSize bounds one SSE line and the data of one event when
// NewEventReader is given no limit. Token chunks are a few hundred bytes; a
// megabyte leaves room for large tool-call arguments while keeping a broken
// provider from growing a worker's memory without end.
const DefaultMaxEventSize = 1 << 20

// readBufferSize is the EventReader's read buffer. A worker holds one per
// generation in flight, so it is sized to a few token chunks (a few hundred
// bytes each) rather than bufio's 4 KiB: a line longer than the buffer is
// gathered across reads (readLine), and the bytes come out of the HTTP
// transport's own buffer, so a smaller one adds copies, not system calls.
const readBufferSize = 1 << 10

// ErrEventTooLarge is returned when a line or an event's data exceeds the
// reader's limit. It wraps ErrMalformed: the stream cannot be parsed further.
var ErrEventTooLarge = fmt.Errorf("%w: event too large", ErrMalformed)

// utf8BOM is stripped from the start of a stream, as the WHATWG decoder does.
var utf8BOM = []byte{0xEF, 0xBB, 0xBF}

// Event is one dispatched server-sent event, or one comment line.
type Event struct {
	// Data is the event's data fields joined with "\n". For a comment it
	// is the text after the colon, unchanged.
	Data []byte
	// Event is the event field; empty when absent (the WHATWG "message").
	Event string
	// ID is the last event ID seen so far in the stream; like in
	// EventSource it carries over to later events.
	ID string
	// Comment reports a comment line (one starting with ":"). Providers
	// send them as keep-alives, so a caller may count them as life.
	Comment bool
}

// EventReader parses a text/event-stream body following the WHATWG
// EventSource rules: lines end in CRLF, LF or CR; an event is dispatched on
// a blank line; fields are data, event and id (retry is ignored because the
// relay does its own reconnecting). Reads may split the input anywhere.
//
// Bytes are not UTF-8 validated: Data is passed on as sent and the JSON
// decoder downstream replaces invalid sequences.
type EventReader struct {
	br  *bufio.Reader
	max int

	line    []byte // the line being read, kept across reads
	skipLF  bool   // the previous line ended in CR, so a leading LF belongs to it
	started bool   // the first line, which may carry a BOM, was read

	data    []byte // data fields, each followed by "\n"
	event   string
	id      string
	pending bool // a field was read since the last blank line

	// lastEvent is the last event name read, so that a stream naming
	// every event (Anthropic's, the Responses API's) costs one string per
	// name, not one per event.
	lastEvent string

	err error // sticky: once set, Next returns it
}

// NewEventReader returns a reader of the event stream r. maxEventSize bounds
// one line and one event's data; zero or less means DefaultMaxEventSize.
func NewEventReader(r io.Reader, maxEventSize int) *EventReader {
	if maxEventSize <= 0 {
		maxEventSize = DefaultMaxEventSize
	}
	return &EventReader{br: bufio.NewReaderSize(r, readBufferSize), max: maxEventSize}
}

// Next returns the next event or comment. It returns io.EOF when the input
// ends between events, and io.ErrUnexpectedEOF when it ends inside one: an
// event without its closing blank line is never dispatched. Other errors
// come from the underlying reader or are ErrEventTooLarge. Errors are
// sticky. The returned Data is the caller's to keep.
func (r *EventReader) Next() (Event, error) {
	ev, err := r.next()
	ev.Data = bytes.Clone(ev.Data)
	return ev, err
}

// next is Next for a caller that is done with an event's Data before it
// asks for the next one (Stream decodes each at once): the Data is the
// reader's own buffer, or the line in its read buffer, not a copy.
func (r *EventReader) next() (Event, error) {
	if r.err != nil {
		return Event{}, r.err
	}
	for {
		line, err := r.readLine()
		if err != nil {
			if errors.Is(err, io.EOF) && (r.pending || len(r.line) > 0) {
				err = io.ErrUnexpectedEOF
			}
			r.err = err
			return Event{}, err
		}
		ev, ok, err := r.processLine(line)
		if err != nil {
			r.err = err
			return Event{}, err
		}
		if ok {
			return ev, nil
		}
	}
}

// processLine applies one line to the event being built. ok reports that ev
// is to be returned.
func (r *EventReader) processLine(line []byte) (ev Event, ok bool, err error) {
	if !r.started {
		r.started = true
		line = bytes.TrimPrefix(line, utf8BOM)
	}
	if len(line) == 0 {
		return r.dispatch()
	}
	if line[0] == ':' {
		return Event{Data: line[1:], Comment: true}, true, nil
	}
	name, value, _ := bytes.Cut(line, []byte{':'})
	value = bytes.TrimPrefix(value, []byte{' '})
	r.pending = true
	switch string(name) {
	case "data":
		if len(r.data)+len(value)+1 > r.max {
			return Event{}, false, fmt.Errorf("%w: data longer than %d bytes", ErrEventTooLarge, r.max)
		}
		r.data = append(r.data, value...)
		r.data = append(r.data, '\n')
	case "event":
		if string(value) != r.lastEvent {
			r.lastEvent = string(value)
		}
		r.event = r.lastEvent
	case "id":
		if bytes.IndexByte(value, 0) < 0 {
			r.id = string(value)
		}
	}
	return Event{}, false, nil
}

// dispatch ends the event at a blank line. Following the spec, an event
// without any data field is dropped, but its id still counts.
func (r *EventReader) dispatch() (ev Event, ok bool, err error) {
	r.pending = false
	if len(r.data) == 0 {
		r.event = ""
		return Event{}, false, nil
	}
	ev = Event{Data: r.data[:len(r.data)-1], Event: r.event, ID: r.id}
	r.data = r.data[:0]
	r.event = ""
	return ev, true, nil
}

// readLine returns the next line without its terminator. The line is only
// valid until the next call: a line found whole in the read buffer is
// returned in place, only one split across reads is gathered in r.line.
// On error, r.line holds the unterminated rest.
//
// A CR ends a line at once, without waiting to see whether an LF follows:
// a provider that ends lines in bare CR and then pauses must not hold back
// the event. The LF, if it comes, is skipped at the start of the next line.
func (r *EventReader) readLine() ([]byte, error) {
	r.line = r.line[:0]
	for {
		buf, err := r.buffered()
		if err != nil {
			return nil, err
		}
		if r.skipLF {
			r.skipLF = false
			if buf[0] == '\n' {
				_, _ = r.br.Discard(1)
				continue
			}
		}
		i := lineEnd(buf)
		if i >= 0 && len(r.line) == 0 && i <= r.max {
			r.skipLF = buf[i] == '\r'
			_, _ = r.br.Discard(i + 1) // keeps buf: nothing is read
			return buf[:i], nil
		}
		part := buf
		if i >= 0 {
			part = buf[:i]
		}
		if len(r.line)+len(part) > r.max {
			return nil, fmt.Errorf("%w: line longer than %d bytes", ErrEventTooLarge, r.max)
		}
		r.line = append(r.line, part...)
		if i < 0 {
			_, _ = r.br.Discard(len(buf))
			continue
		}
		r.skipLF = buf[i] == '\r'
		_, _ = r.br.Discard(i + 1)
		return r.line, nil
	}
}

// lineEnd returns the index of the first CR or LF in b, -1 if none.
// (bytes.IndexAny would test every byte against a set; IndexByte is the
// vectorized search.)
func lineEnd(b []byte) int {
	lf := bytes.IndexByte(b, '\n')
	if lf < 0 {
		lf = len(b)
	}
	if cr := bytes.IndexByte(b[:lf], '\r'); cr >= 0 {
		return cr
	}
	if lf == len(b) {
		return -1
	}
	return lf
}

// buffered returns the bytes already buffered, reading once if there are
// none, so a line is returned as soon as its terminator arrives.
func (r *EventReader) buffered() ([]byte, error) {
	if r.br.Buffered() == 0 {
		if _, err := r.br.Peek(1); err != nil {
			return nil, err
		}
	}
	return r.br.Peek(r.br.Buffered())
}
