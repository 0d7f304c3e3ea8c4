package durable

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	store "github.com/relaydev/relay/relay/durable"
	"github.com/relaydev/relay/relay/wire"
)

// sseWriteTimeout bounds the write of one batch of events.
const sseWriteTimeout = 10 * time.Second

// control is the protocol's SSE control event.
type control struct {
	NextOffset string `json:"streamNextOffset"`
	Cursor     string `json:"streamCursor,omitempty"`
	UpToDate   bool   `json:"upToDate,omitempty"`
	Closed     bool   `json:"streamClosed,omitempty"`
}

// textual reports whether a stream's data goes into SSE as it is: text
// and JSON do, anything else is base64.
func textual(contentType string) bool {
	mt := store.MediaType(contentType)
	return strings.HasPrefix(mt, "text/") || mt == "application/json"
}

// serveSSE answers live=sse: every chunk after the offset as a data event
// followed by a control event, then the live ones as they are stored,
// until the stream closes or SSEDuration passes.
func (h *Handler) serveSSE(w http.ResponseWriter, r *http.Request, k *wire.CursorKey, src source, req request) {
	ctx := r.Context()
	wake, stop := h.subscribe(src.id())
	defer stop()
	from := req.from
	if req.now {
		t, err := src.tail(ctx)
		if err != nil {
			h.fail(w, storeError(err))
			return
		}
		from = t.Offset
	}
	p, err := src.page(ctx, from)
	if err != nil {
		h.fail(w, storeError(err))
		return
	}
	hdr := w.Header()
	src.describe(hdr)
	hdr.Set("Content-Type", "text/event-stream")
	hdr.Set("Cache-Control", "no-cache, no-transform")
	hdr.Set("X-Accel-Buffering", "no")
	binary := !textual(src.contentType())
	if binary {
		hdr.Set(hSSEEncoding, "base64")
	}
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	isJSON := store.IsJSON(src.contentType())
	clientCursor := r.URL.Query().Get("cursor")
	end := time.NewTimer(h.cfg.SSEDuration)
	defer end.Stop()
	keepalive := time.NewTicker(h.cfg.Keepalive)
	defer keepalive.Stop()
	first := true
	for {
		var b bytes.Buffer
		for i, c := range p.Chunks {
			writeData(&b, c, isJSON, binary)
			last := i == len(p.Chunks)-1
			ctl := control{NextOffset: k.Offset(c.At), UpToDate: last && p.UpToDate, Closed: last && p.Closed}
			writeControl(&b, ctl, h.cursor(clientCursor))
		}
		if len(p.Chunks) == 0 && (first || p.Closed) {
			writeControl(&b, control{NextOffset: k.Offset(p.Next), UpToDate: p.UpToDate, Closed: p.Closed}, h.cursor(clientCursor))
		}
		first = false
		if b.Len() > 0 {
			_ = rc.SetWriteDeadline(time.Now().Add(sseWriteTimeout))
			if _, err := w.Write(b.Bytes()); err != nil {
				return
			}
			if err := rc.Flush(); err != nil {
				return
			}
		}
		if p.Closed {
			return
		}
		from = p.Next
		if !p.UpToDate {
			if p, err = src.page(ctx, from); err != nil {
				return
			}
			continue
		}
	wait:
		for {
			select {
			case <-ctx.Done():
				return
			case <-end.C:
				return
			case <-h.deps.Drain:
				var b bytes.Buffer
				writeControl(&b, control{NextOffset: k.Offset(from), UpToDate: true}, h.cursor(clientCursor))
				_ = rc.SetWriteDeadline(time.Now().Add(sseWriteTimeout))
				if _, err := w.Write(b.Bytes()); err == nil {
					_ = rc.Flush()
				}
				return
			case <-keepalive.C:
				_ = rc.SetWriteDeadline(time.Now().Add(sseWriteTimeout))
				if _, err := w.Write([]byte(": keepalive\n\n")); err != nil {
					return
				}
				if err := rc.Flush(); err != nil {
					return
				}
			case <-wake:
				break wait
			}
		}
		if p, err = src.page(ctx, from); err != nil {
			return
		}
	}
}

// writeData writes one chunk as a data event: text line by line (so no
// byte of it can end the event), JSON as an array, anything else as
// base64.
func writeData(b *bytes.Buffer, c store.Chunk, isJSON, binary bool) {
	b.WriteString("event: data\n")
	var text string
	switch {
	case binary:
		text = base64.StdEncoding.EncodeToString(c.Data)
	case isJSON:
		text = "[" + string(c.Data) + "]"
	default:
		text = string(c.Data)
	}
	for _, line := range splitLines(text) {
		b.WriteString("data:")
		if strings.HasPrefix(line, " ") {
			// A reader drops one space after the colon: this keeps the
			// line's own.
			b.WriteByte(' ')
		}
		b.WriteString(line)
		b.WriteByte('\n')
	}
	b.WriteByte('\n')
}

// splitLines splits text at every line end SSE knows (CRLF, LF, CR).
func splitLines(text string) []string {
	text = strings.ReplaceAll(text, "\r\n", "\n")
	text = strings.ReplaceAll(text, "\r", "\n")
	return strings.Split(text, "\n")
}

// writeControl writes a control event; an open stream's carries a cursor.
func writeControl(b *bytes.Buffer, c control, cursor string) {
	if !c.Closed {
		c.Cursor = cursor
	}
	data, _ := json.Marshal(c)
	b.WriteString("event: control\ndata:")
	b.Write(data)
	b.WriteString("\n\n")
}
