package edge

import (
	"bytes"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/relaydev/relay/relay/wire"
)

// sseWriter buffers server-sent events and writes them in batches: one
// write deadline and one write per batch, to the response (responseSink)
// or to a connection taken over from net/http (chunkedConn). The buffer
// is borrowed from a pool while something is queued, so an idle stream
// holds none.
type sseWriter struct {
	dst sseSink
	buf *bytes.Buffer
}

// sseSink writes one batch to the client within writeTimeout.
type sseSink interface {
	write(p []byte) error
}

// lastSink is a sink that ends the response body itself (chunkedConn):
// writeLast writes the last batch and the end of the body in one write,
// which saves a write a response.
type lastSink interface {
	writeLast(p []byte) error
}

// setSSEHeaders sets the event-stream headers. no-transform and
// X-Accel-Buffering keep proxies from compressing or buffering the stream.
func setSSEHeaders(h http.Header) {
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache, no-transform")
	h.Set("X-Accel-Buffering", "no")
	h.Set("Connection", "keep-alive")
}

// bufs holds batch buffers between batches; maxPooled bounds the ones kept
// (a catch-up batch can be large).
var bufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

const maxPooled = 64 << 10

func (s *sseWriter) b() *bytes.Buffer {
	if s.buf == nil {
		s.buf = bufs.Get().(*bytes.Buffer)
	}
	return s.buf
}

// start queues the reconnection delay for EventSource, as an event of its
// own.
func (s *sseWriter) start(retry time.Duration) {
	s.retry(retry)
	s.b().WriteByte('\n')
}

// retry queues a "retry:" field, the delay before an EventSource
// reconnects. Followed by a blank line it is an event of its own; followed
// by an event's fields, it is part of that event.
func (s *sseWriter) retry(d time.Duration) {
	b := s.b()
	b.WriteString("retry: ")
	b.WriteString(strconv.FormatInt(d.Milliseconds(), 10))
	b.WriteByte('\n')
}

// event queues an event. id is empty for events that must not move the
// client's Last-Event-ID.
func (s *sseWriter) event(id string, data []byte) {
	b := s.b()
	if id != "" {
		b.WriteString("id: ")
		b.WriteString(id)
		b.WriteByte('\n')
	}
	b.WriteString("data: ")
	b.Write(data)
	b.WriteString("\n\n")
}

// cursorEvent queues an event whose id is cursor c sealed with key and
// whose data appendData appends (one line: JSON) to the bytes it is
// handed, straight into the batch, so that rendering it allocates nothing
// of its own.
func (s *sseWriter) cursorEvent(key *wire.CursorKey, c wire.Cursor, appendData func([]byte) []byte) {
	buf := s.b()
	buf.Grow(eventRoom)
	b := append(buf.AvailableBuffer(), "id: "...)
	b = key.Append(b, c)
	b = append(b, "\ndata: "...)
	b = appendData(b)
	buf.Write(append(b, "\n\n"...))
}

// eventRoom is the free space a batch buffer is grown to before an event
// is appended to it: a common chunk's event fits.
const eventRoom = 1 << 10

// typed queues an event with a type (an "event:" field), as the Responses
// API sends every event, and no id.
func (s *sseWriter) typed(event string, data []byte) {
	b := s.b()
	b.WriteString("event: ")
	b.WriteString(event)
	b.WriteString("\ndata: ")
	b.Write(data)
	b.WriteString("\n\n")
}

// Event queues an event with an id and a type (chat.EventWriter).
func (s *sseWriter) Event(id, event string, data []byte) {
	b := s.b()
	b.WriteString("id: ")
	b.WriteString(id)
	b.WriteByte('\n')
	s.typed(event, data)
}

// keepalive queues a comment, which clients ignore and proxies count as
// traffic.
func (s *sseWriter) keepalive() { s.b().WriteString(": keepalive\n\n") }

// done queues OpenAI's end-of-stream marker.
func (s *sseWriter) done() { s.b().WriteString("data: [DONE]\n\n") }

// len is how many bytes are queued.
func (s *sseWriter) len() int {
	if s.buf == nil {
		return 0
	}
	return s.buf.Len()
}

// flush writes what is queued and returns the buffer to the pool.
func (s *sseWriter) flush() error { return s.flushWith(s.dst.write) }

// flushLast is flush for the response's last batch: a sink that ends the
// body itself (lastSink) ends it in the same write.
func (s *sseWriter) flushLast() error {
	if l, ok := s.dst.(lastSink); ok {
		return s.flushWith(l.writeLast)
	}
	return s.flush()
}

func (s *sseWriter) flushWith(write func([]byte) error) error {
	b := s.b()
	err := write(b.Bytes())
	s.buf = nil
	putBuf(b)
	return err
}

// putBuf returns a buffer to bufs, unless it grew too large to keep.
func putBuf(b *bytes.Buffer) {
	if b.Cap() <= maxPooled {
		b.Reset()
		bufs.Put(b)
	}
}

// responseSink writes batches through net/http's response: a write
// deadline, a write and a flush each.
type responseSink struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

func newResponseSink(w http.ResponseWriter) responseSink {
	return responseSink{w: w, rc: http.NewResponseController(w)}
}

func (r responseSink) write(p []byte) error {
	if err := r.rc.SetWriteDeadline(time.Now().Add(writeTimeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	if _, err := r.w.Write(p); err != nil {
		return err
	}
	return r.rc.Flush()
}
