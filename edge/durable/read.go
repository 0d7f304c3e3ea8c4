package durable

import (
	"bytes"
	"context"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"

	store "github.com/relaydev/relay/relay/durable"
	"github.com/relaydev/relay/relay/wire"
)

// maxPage bounds the data of one catch-up response, and maxPageChunks its
// appends; a longer stream is read on from the response's
// Stream-Next-Offset. A response's headers say where it ends, so it is
// read whole before its first byte: a page of a few batches of the log
// starts a long catch-up (or a live=sse one) within a few milliseconds,
// where one of a megabyte took tens.
const (
	maxPage       = 1 << 20
	maxPageChunks = 64
)

// request is a GET's reading of its query.
type request struct {
	from wire.Offset
	now  bool // offset=now: from the tail, skipping what is there
	live string
}

// readRequest parses offset and live: a live read needs an offset; an
// offset given must be one, and once.
func readRequest(r *http.Request, k *wire.CursorKey) (request, *wire.Error) {
	q := r.URL.Query()
	var req request
	live := q["live"]
	if len(live) > 1 {
		return req, badRequest("live", "live is given more than once")
	}
	if len(live) == 1 {
		req.live = live[0]
		if req.live != "long-poll" && req.live != "sse" {
			return req, badRequest("live", "live must be long-poll or sse")
		}
	}
	offsets, given := q["offset"]
	switch {
	case !given && req.live != "":
		return req, badRequest("offset", "a live read needs an offset")
	case !given:
		return req, nil
	case len(offsets) > 1:
		return req, badRequest("offset", "offset is given more than once")
	}
	if offsets[0] == "now" {
		req.now = true
		return req, nil
	}
	from, err := parseOffset(k, offsets[0])
	if err != nil {
		return req, badRequest("offset", "not an offset of this stream")
	}
	req.from = from
	return req, nil
}

// zeroOffset is the start of a stream as clients that construct offsets
// write it (the suite does): taken as -1.
const zeroOffset = "0000000000000000_0000000000000000"

// parseOffset reads an offset a client gives: -1 (or zeroOffset), the
// start; else one the edge made.
func parseOffset(k *wire.CursorKey, s string) (wire.Offset, error) {
	if s == "-1" || s == zeroOffset {
		return store.Start, nil
	}
	return k.ParseOffset(s)
}

// read answers GET: catch-up, long-poll or SSE.
func (h *Handler) read(w http.ResponseWriter, r *http.Request, acc Access, path string) {
	ctx := r.Context()
	k, e := h.key(ctx)
	if e != nil {
		h.fail(w, e)
		return
	}
	req, e := readRequest(r, k)
	if e != nil {
		h.fail(w, e)
		return
	}
	st, e := h.open(ctx, acc, path)
	if e != nil {
		h.fail(w, e)
		return
	}
	h.deps.Store.Touch(ctx, st)
	src := streamSource{h: h, st: st}
	if req.live == "sse" {
		h.serveSSE(w, r, k, src, req)
		return
	}
	h.serveRead(w, r, k, src, req)
}

// source is what a read serves: a Durable Stream, or a generation seen
// as one.
type source interface {
	id() string
	contentType() string
	describe(http.Header)
	tail(context.Context) (store.Tail, error)
	page(ctx context.Context, from wire.Offset) (store.Page, error)
}

type streamSource struct {
	h  *Handler
	st *store.Stream
}

func (s streamSource) id() string               { return s.st.ID }
func (s streamSource) contentType() string      { return s.st.ContentType }
func (s streamSource) describe(hdr http.Header) { s.h.describe(hdr, s.st) }
func (s streamSource) tail(ctx context.Context) (store.Tail, error) {
	return s.h.deps.Store.TailOf(ctx, s.st)
}
func (s streamSource) page(ctx context.Context, from wire.Offset) (store.Page, error) {
	return s.h.deps.Store.Read(ctx, s.st, from, maxPage, maxPageChunks)
}

// serveRead answers a catch-up or long-poll read.
func (h *Handler) serveRead(w http.ResponseWriter, r *http.Request, k *wire.CursorKey, src source, req request) {
	ctx := r.Context()
	hdr := w.Header()
	src.describe(hdr)
	hdr.Set("Content-Type", src.contentType())
	isJSON := store.IsJSON(src.contentType())
	from := req.from
	if req.now {
		t, err := src.tail(ctx)
		if err != nil {
			h.fail(w, storeError(err))
			return
		}
		from = t.Offset
		if req.live == "" || t.Closed {
			hdr.Set(hNextOffset, k.Offset(t.Offset))
			hdr.Set(hUpToDate, "true")
			hdr.Set("Cache-Control", "no-store")
			if t.Closed {
				hdr.Set(hClosed, "true")
			}
			if req.live != "" {
				w.WriteHeader(http.StatusNoContent)
				return
			}
			w.WriteHeader(http.StatusOK)
			if isJSON {
				w.Write([]byte("[]"))
			}
			return
		}
	}
	var wake <-chan struct{}
	if req.live == "long-poll" {
		ch, stop := h.subscribe(src.id())
		defer stop()
		wake = ch
	}
	p, err := src.page(ctx, from)
	if err != nil {
		h.fail(w, storeError(err))
		return
	}
	if req.live == "long-poll" && len(p.Chunks) == 0 && !p.Closed {
		if p, err = h.waitForData(ctx, src, from, wake); err != nil {
			if ctx.Err() == nil { // else the client is gone
				h.fail(w, storeError(err))
			}
			return
		}
	}
	hdr.Set(hNextOffset, k.Offset(p.Next))
	if p.UpToDate {
		hdr.Set(hUpToDate, "true")
	}
	if p.Closed {
		hdr.Set(hClosed, "true")
	}
	if req.live != "" && !p.Closed {
		hdr.Set(hCursor, h.cursor(r.URL.Query().Get("cursor")))
	}
	if req.live == "long-poll" && len(p.Chunks) == 0 {
		hdr.Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusNoContent)
		return
	}
	etag := `"` + src.id() + ":" + k.Offset(from) + ":" + k.Offset(p.Next)
	if p.Closed {
		etag += ":c"
	}
	etag += `"`
	hdr.Set("ETag", etag)
	hdr.Set("Cache-Control", "private, max-age=60, stale-while-revalidate=300")
	if inm := r.Header.Get("If-None-Match"); inm != "" && inm == etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	body := pageBody(p.Chunks, isJSON)
	hdr.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	w.Write(body)
}

// waitForData waits up to the long-poll timeout for data after from,
// woken by the stream's stored frames, and returns the page then read.
func (h *Handler) waitForData(ctx context.Context, src source, from wire.Offset, wake <-chan struct{}) (store.Page, error) {
	timer := time.NewTimer(h.cfg.LongPollTimeout)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return store.Page{}, ctx.Err()
		case <-timer.C:
			return src.page(ctx, from)
		case <-h.deps.Drain:
			return src.page(ctx, from)
		case <-wake:
		}
		p, err := src.page(ctx, from)
		if err != nil || len(p.Chunks) > 0 || p.Closed {
			return p, err
		}
	}
}

// pageBody is the body of a read: the chunks' bytes, or for a JSON stream
// one array of their messages.
func pageBody(chunks []store.Chunk, isJSON bool) []byte {
	var b bytes.Buffer
	if isJSON {
		b.WriteByte('[')
	}
	first := true
	for _, c := range chunks {
		if len(c.Data) == 0 {
			continue
		}
		if isJSON && !first {
			b.WriteByte(',')
		}
		first = false
		b.Write(c.Data)
	}
	if isJSON {
		b.WriteByte(']')
	}
	return b.Bytes()
}

// subscribe wakes the returned channel when a frame of stream id is
// stored; stop ends it.
func (h *Handler) subscribe(id string) (<-chan struct{}, func()) {
	wake := make(chan struct{}, 1)
	sub, err := h.deps.NC.Subscribe(wire.LiveSubject(id), func(*nats.Msg) {
		select {
		case wake <- struct{}{}:
		default:
		}
	})
	if err != nil {
		h.deps.Logger.Warn("durable streams: subscribe to live frames", "stream", id, "err", err)
		return wake, func() {}
	}
	return wake, func() { _ = sub.Unsubscribe() }
}

// cursorEpoch and cursorInterval are the protocol's defaults for
// Stream-Cursor: the count of 20-second intervals since 2024-10-09.
var cursorEpoch = time.Date(2024, 10, 9, 0, 0, 0, 0, time.UTC)

const cursorInterval = 20 * time.Second

// cursor is the Stream-Cursor of a live response: the current interval,
// or past the client's cursor by a random jitter when the client's is not
// behind, so that cursors never repeat.
func (h *Handler) cursor(client string) string {
	n := int64(h.now().Sub(cursorEpoch) / cursorInterval)
	if c, err := strconv.ParseInt(client, 10, 64); err == nil && c >= n {
		jitter := time.Duration(1+rand.IntN(3600)) * time.Second
		n = c + max(1, int64(jitter/cursorInterval))
	}
	return strconv.FormatInt(n, 10)
}
