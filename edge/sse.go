package edge

import (
	"bytes"
	"errors"
	"net/http"
	"strconv"
	"time"
)

// sseWriter buffers server-sent events and writes them in batches: one
// write deadline, one write and one flush per batch.
type sseWriter struct {
	w   http.ResponseWriter
	rc  *http.ResponseController
	buf bytes.Buffer
}

func newSSEWriter(w http.ResponseWriter) *sseWriter {
	return &sseWriter{w: w, rc: http.NewResponseController(w)}
}

// start sets the event-stream headers and queues the reconnection delay
// for EventSource. no-transform and X-Accel-Buffering keep proxies from
// compressing or buffering the stream.
func (s *sseWriter) start(retry time.Duration) {
	h := s.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache, no-transform")
	h.Set("X-Accel-Buffering", "no")
	h.Set("Connection", "keep-alive")
	s.retry(retry)
	s.buf.WriteByte('\n')
}

// retry queues a "retry:" field, the delay before an EventSource
// reconnects. Followed by a blank line it is an event of its own; followed
// by an event's fields, it is part of that event.
func (s *sseWriter) retry(d time.Duration) {
	s.buf.WriteString("retry: ")
	s.buf.WriteString(strconv.FormatInt(d.Milliseconds(), 10))
	s.buf.WriteByte('\n')
}

// event queues an event. id is empty for events that must not move the
// client's Last-Event-ID.
func (s *sseWriter) event(id string, data []byte) {
	if id != "" {
		s.buf.WriteString("id: ")
		s.buf.WriteString(id)
		s.buf.WriteByte('\n')
	}
	s.buf.WriteString("data: ")
	s.buf.Write(data)
	s.buf.WriteString("\n\n")
}

// keepalive queues a comment, which clients ignore and proxies count as
// traffic.
func (s *sseWriter) keepalive() { s.buf.WriteString(": keepalive\n\n") }

// done queues OpenAI's end-of-stream marker.
func (s *sseWriter) done() { s.buf.WriteString("data: [DONE]\n\n") }

// flush writes what is queued and flushes it to the client.
func (s *sseWriter) flush() error {
	if err := s.rc.SetWriteDeadline(time.Now().Add(writeTimeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	_, err := s.w.Write(s.buf.Bytes())
	s.buf.Reset()
	if err != nil {
		return err
	}
	return s.rc.Flush()
}
