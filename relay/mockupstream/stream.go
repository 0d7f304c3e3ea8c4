package mockupstream

import (
	"context"
	"errors"
	"net/http"
	"time"
	"unicode/utf8"
)

// writeTimeout bounds each write of a stream, so a client that stops
// reading cannot hold a handler forever.
const writeTimeout = 10 * time.Second

var (
	eventDone = []byte("data: [DONE]\n\n")
	keepalive = []byte(": keepalive\n\n")
)

// stream sends rep as server-sent events: a role chunk, one chunk per
// token, a finish chunk, the usage chunk if asked for, and [DONE], with the
// faults in f shaping the stream on the way.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, rep reply, f faults, includeUsage bool) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)

	out := &eventWriter{w: w, rc: http.NewResponseController(w), split: f.splitUTF8, commentEvery: s.cfg.CommentInterval}
	defer out.clearDeadline()
	ctx := r.Context()
	if out.chunk(rep.chunk(delta{Role: roleAssistant, Content: ptr("")}, nil)) != nil || !s.awaitFirstToken(ctx, out, f) {
		return
	}
	for i := range rep.reasoning {
		if out.pause(ctx, s.cfg.TokenInterval) != nil || out.chunk(rep.chunk(delta{ReasoningContent: &rep.reasoning[i]}, nil)) != nil {
			return
		}
	}
	for sent := 0; ; sent++ {
		if f.stallFor > 0 && sent == f.stallAfter {
			if out.pause(ctx, f.stallFor) != nil {
				return
			}
		}
		if f.end != endNormal && sent == f.endAfter {
			out.endEarly(f.end, rep.id)
			return
		}
		if sent == len(rep.tokens) {
			break
		}
		c := rep.chunk(delta{Content: &rep.tokens[sent]}, nil)
		c.Choices[0].Logprobs = rep.logprobsOf(rep.tokens[sent])
		if out.pause(ctx, s.cfg.TokenInterval) != nil || out.chunk(c) != nil {
			return
		}
	}
	if out.chunk(rep.chunk(delta{}, &rep.finish)) != nil {
		return
	}
	if includeUsage {
		u := rep.chunk(delta{}, nil)
		u.Choices, u.Usage = []chunkChoice{}, &rep.usage
		if out.chunk(u) != nil {
			return
		}
	}
	if !f.noDone {
		_ = out.write(eventDone)
	}
}

// chunk builds a chunk of rep with one choice.
func (rep reply) chunk(d delta, finish *string) chunk {
	return chunk{
		ID:                rep.id,
		Object:            "chat.completion.chunk",
		Created:           rep.created,
		Model:             rep.model,
		SystemFingerprint: systemFingerprint,
		Choices:           []chunkChoice{{Delta: d, FinishReason: finish}},
	}
}

// eventWriter writes and flushes one SSE event at a time.
type eventWriter struct {
	w            http.ResponseWriter
	rc           *http.ResponseController
	split        bool          // split_utf8: cut writes inside characters
	commentEvery time.Duration // Config.CommentInterval
}

func (e *eventWriter) chunk(c chunk) error {
	b, err := marshal(c)
	if err != nil {
		return err
	}
	return e.write(append(append([]byte("data: "), b...), "\n\n"...))
}

// write sends b and flushes it, in pieces if split_utf8 is on.
func (e *eventWriter) write(b []byte) error {
	pieces := [][]byte{b}
	if e.split {
		pieces = splitInsideRunes(b)
	}
	for _, p := range pieces {
		if err := e.rc.SetWriteDeadline(time.Now().Add(writeTimeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
			return err
		}
		if _, err := e.w.Write(p); err != nil {
			return err
		}
		if err := e.rc.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// clearDeadline removes the last write deadline, which could otherwise
// expire during a final stall and break the end of a body that should end
// cleanly.
func (e *eventWriter) clearDeadline() {
	_ = e.rc.SetWriteDeadline(time.Time{})
}

// pause waits d, sending keepalive comments if they are configured.
func (e *eventWriter) pause(ctx context.Context, d time.Duration) error {
	return wait(ctx, d, e.commentEvery, func() error { return e.write(keepalive) })
}

// endEarly ends a stream the way the fault says, without finish reason or
// [DONE].
func (e *eventWriter) endEarly(end ending, id string) {
	switch end {
	case endCut:
		// Aborting makes net/http close the connection without the final
		// empty chunk, so the client sees an unexpected EOF (HTTP/1) or a
		// stream reset (HTTP/2), as when a provider's connection drops.
		panic(http.ErrAbortHandler)
	case endMalformed:
		_ = e.write([]byte(`data: {"id":"` + id + `","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"` + "\n\n"))
	case endError:
		_ = e.write([]byte(`data: {"error":{"message":"` + overloaded + `","type":"server_error","param":null,"code":null}}` + "\n\n"))
	}
}

// splitInsideRunes cuts b after the first byte of every multi-byte
// character, so those writes end inside a character. An event without one
// is cut in half, which still splits its line across writes.
func splitInsideRunes(b []byte) [][]byte {
	var pieces [][]byte
	start := 0
	for i := 0; i < len(b); {
		_, size := utf8.DecodeRune(b[i:])
		if size > 1 {
			pieces = append(pieces, b[start:i+1])
			start = i + 1
		}
		i += size
	}
	if start == 0 {
		return [][]byte{b[:len(b)/2], b[len(b)/2:]}
	}
	return append(pieces, b[start:])
}
