package durable

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/relaydev/relay/relay/chunklog"
	"github.com/relaydev/relay/relay/dialect/chat"
	store "github.com/relaydev/relay/relay/durable"
	"github.com/relaydev/relay/relay/wire"
)

// # Generations as Durable Streams
//
// Every generation the relay stores is readable, read-only, at
// {prefix}/generations/{id}: a JSON stream whose messages are its frames
// rendered in a dialect (?dialect=, "chat" by default), its end frame the
// last message and the stream's closure, its lifetime the log's
// retention. An offset is the rendered frame's position, as for any
// Durable Stream.

// Generations is what the handler needs of the relay's generations.
type Generations interface {
	// Meta is the generation's metadata (its tenant), or
	// durable.ErrNotFound for none.
	Meta(ctx context.Context, id string) (wire.Meta, error)
	// Retention is how long the log keeps the generation's frames.
	Retention(ctx context.Context, id string) (time.Duration, error)
	// Reader reads its frames.
	Reader() *chunklog.Reader
}

// Generation is one generation as a Dialect sees it.
type Generation struct {
	ID      string
	Meta    wire.Meta
	Cursors *wire.CursorKey
}

// A Dialect renders a generation's frames as the messages of its Durable
// Stream: New returns the Renderer of one read. A dialect whose messages
// depend on the frames before them (part ids, which part is open) says
// Replays: a read from an offset first renders the frames before it, and
// drops what they render, so that it goes on as a read from the start
// would.
type Dialect struct {
	New     func(g Generation) Renderer
	Replays bool
}

// Renderer renders one read's frames. Render appends the messages of a
// frame to b, each a JSON value, comma-separated; n counts them (none
// for a frame that renders none, a claim). A read with snapshot=true
// first folds the frames stored when it began: Fold takes a frame into
// the snapshot, and Snapshot appends the snapshot's messages (what was
// said so far, in the dialect's shape) and ends it.
type Renderer interface {
	Render(b []byte, c wire.Cursor, f *wire.Frame) (out []byte, n int)
	Fold(c wire.Cursor, f *wire.Frame)
	Snapshot(b []byte) (out []byte, n int)
}

// ChatDialect renders each frame as the chat dialect does for
// GET /v1/streams/{id}: a chat.completion.chunk, the done end frame as
// the last chunk with its finish_reason and usage, any other end as the
// error object; a snapshot is the one chunk of GET /v1/streams/{id}?snapshot=true.
var ChatDialect = Dialect{New: func(g Generation) Renderer {
	return &chatRenderer{s: chat.Stream{ID: g.ID, Meta: g.Meta, Cursors: g.Cursors}}
}}

type chatRenderer struct {
	s chat.Stream
	p chat.Snapshot
}

func (r *chatRenderer) Render(b []byte, c wire.Cursor, f *wire.Frame) ([]byte, int) {
	if f.Kind == wire.KindClaim {
		return b, 0
	}
	return r.s.AppendObject(b, c, f), 1
}

func (r *chatRenderer) Fold(c wire.Cursor, f *wire.Frame) {
	if f.Kind == wire.KindChunk {
		r.p.Add(c, *f)
	}
}

func (r *chatRenderer) Snapshot(b []byte) ([]byte, int) {
	if r.p.Empty() {
		return b, 0
	}
	msg, err := json.Marshal(r.s.SnapshotChunk(&r.p))
	r.p = chat.Snapshot{}
	if err != nil {
		return b, 0
	}
	return append(b, msg...), 1
}

// defaultDialect is the renderer of a read that names none.
const defaultDialect = "chat"

func (h *Handler) serveGeneration(w http.ResponseWriter, r *http.Request, acc Access, id string) {
	if h.deps.Generations == nil || !wire.ValidGenerationID(id) {
		h.fail(w, storeError(store.ErrNotFound))
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		h.fail(w, methodNotAllowed(r))
		return
	}
	ctx := r.Context()
	dialect := r.URL.Query().Get("dialect")
	if dialect == "" {
		dialect = defaultDialect
	}
	d, ok := h.dialects[dialect]
	if !ok {
		h.fail(w, badRequest("dialect", "no dialect %q", dialect))
		return
	}
	meta, err := h.deps.Generations.Meta(ctx, id)
	if err != nil {
		h.fail(w, storeError(err))
		return
	}
	owner := acc.Tenant
	if acc.Token != "" {
		t, ok := acc.Verify(acc.Token, id)
		if !ok {
			h.fail(w, forbiddenToken())
			return
		}
		owner = t
	}
	if meta.Tenant != owner {
		// Another tenant's generation answers as an unknown one.
		h.fail(w, storeError(store.ErrNotFound))
		return
	}
	k, e := h.key(ctx)
	if e != nil {
		h.fail(w, e)
		return
	}
	g := &generationSource{gens: h.deps.Generations, g: Generation{ID: id, Meta: meta, Cursors: k}, dialect: d}
	if ret, err := h.deps.Generations.Retention(ctx, id); err == nil && ret > 0 {
		g.expires = time.Unix(meta.Created, 0).Add(ret)
	}
	if r.Method == http.MethodHead {
		t, err := g.tail(ctx)
		if err != nil {
			h.fail(w, storeError(err))
			return
		}
		hdr := w.Header()
		g.describe(hdr)
		hdr.Set("Content-Type", g.contentType())
		hdr.Set(hNextOffset, k.Offset(t.Offset))
		hdr.Set("Cache-Control", "no-store")
		if t.Closed {
			hdr.Set(hClosed, "true")
		}
		w.WriteHeader(http.StatusOK)
		return
	}
	req, e := readRequest(r, k)
	if e != nil {
		h.fail(w, e)
		return
	}
	if g.snapshot, e = WantsSnapshot(r); e != nil {
		h.fail(w, e)
		return
	}
	if req.live == "sse" {
		h.serveSSE(w, r, k, g, req)
		return
	}
	h.serveRead(w, r, k, g, req)
}

// WantsSnapshot reads snapshot=, which every resume path of the edge
// takes: whether a read folds what was stored when it began into a
// snapshot first.
func WantsSnapshot(r *http.Request) (bool, *wire.Error) {
	v := r.URL.Query().Get("snapshot")
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, badRequest("snapshot", "snapshot must be true or false")
	}
	return b, nil
}

// generationSource reads a generation as a Durable Stream. One read's
// pages share its renderer: rendered is the last frame it rendered.
// With snapshot, the read's first page folds the frames up to the tail
// it found (not the end frame) into one chunk, at the last one's offset;
// snapped says it is done.
type generationSource struct {
	gens     Generations
	g        Generation
	dialect  Dialect
	expires  time.Time
	render   Renderer
	rendered uint64
	snapshot bool
	snapped  bool
}

func (s *generationSource) id() string          { return s.g.ID }
func (s *generationSource) contentType() string { return "application/json" }

func (s *generationSource) describe(hdr http.Header) {
	hdr.Set(HeaderStreamID, s.g.ID)
	if !s.expires.IsZero() {
		hdr.Set(hExpiresAt, s.expires.UTC().Format(time.RFC3339))
	}
}

// tail is the offset of the generation's last rendered frame: its end
// frame once it has one (then it is closed).
func (s *generationSource) tail(ctx context.Context) (store.Tail, error) {
	e, err := s.gens.Reader().LastEntry(ctx, s.g.ID)
	switch {
	case err != nil:
		return store.Tail{}, err
	case e.JSSeq == 0:
		return store.Tail{}, store.ErrGone
	case e.Frame.Kind != wire.KindClaim:
		return store.Tail{Offset: wire.Offset{Seq: e.Frame.Seq, JSSeq: e.JSSeq}, Closed: e.Frame.Kind == wire.KindEnd}, nil
	}
	// A claim last (the stream's start, or a takeover): the tail is the
	// frame before it.
	var t store.Tail
	_, err = s.gens.Reader().Read(ctx, s.g.ID, 0, func(e chunklog.Entry) error {
		if e.Frame.Kind != wire.KindClaim {
			t.Offset = wire.Offset{Seq: e.Frame.Seq, JSSeq: e.JSSeq}
		}
		return nil
	})
	return t, err
}

// errPageFull ends a page's read of the log.
var errPageFull = errors.New("durable: page full")

// page renders the frames after from.
func (s *generationSource) page(ctx context.Context, from wire.Offset) (store.Page, error) {
	t, err := s.tail(ctx)
	if err != nil {
		return store.Page{}, err
	}
	after := from.JSSeq
	if s.render == nil || s.rendered != from.Seq {
		s.render, s.rendered = s.dialect.New(s.g), from.Seq
		if s.dialect.Replays {
			after, s.rendered = 0, 0
		}
	}
	through := uint64(0) // the last frame a snapshot folds
	if s.snapshot && !s.snapped {
		through = t.Offset.Seq
		if t.Closed {
			through--
		}
	}
	p := store.Page{Next: from}
	var scratch []byte
	var folded wire.Offset
	size, expect := 0, s.rendered+1
	snap := func() {
		s.snapped = true
		if msg, n := s.render.Snapshot(nil); n > 0 {
			p.Chunks = append(p.Chunks, store.Chunk{Data: msg, Messages: n, At: folded})
			p.Next = folded
			size += len(msg)
		}
	}
	_, err = s.gens.Reader().Read(ctx, s.g.ID, after, func(e chunklog.Entry) error {
		f := e.Frame
		if f.Kind == wire.KindClaim {
			return nil
		}
		if f.Seq != expect {
			return store.ErrGone
		}
		expect++
		c := wire.Cursor{Seq: f.Seq, JSSeq: e.JSSeq}
		at := wire.Offset{Seq: f.Seq, JSSeq: e.JSSeq}
		if f.Seq > from.Seq && f.Seq <= through {
			s.render.Fold(c, &f)
			s.rendered, folded = f.Seq, at
			if f.Seq == through {
				snap()
			}
			return nil
		}
		msg, n := s.render.Render(scratch[:0], c, &f)
		scratch = msg
		s.rendered = f.Seq
		if f.Seq <= from.Seq || n == 0 {
			// Replayed for the renderer's state, or rendered as nothing.
			return nil
		}
		if len(p.Chunks) > 0 && size+len(msg) > maxPage {
			// The renderer has gone past the page: the next page
			// starts over.
			s.render = nil
			return errPageFull
		}
		p.Chunks = append(p.Chunks, store.Chunk{Data: bytes.Clone(msg), Messages: n, At: at})
		p.Next = at
		size += len(msg)
		return nil
	})
	full := errors.Is(err, errPageFull)
	if err != nil && !full {
		return store.Page{}, err
	}
	if through > 0 && !s.snapped {
		// The read ended before the tail it found (or had nothing
		// after from to fold).
		snap()
	}
	p.UpToDate = !full && p.Next.Seq >= t.Offset.Seq
	p.Closed = p.UpToDate && t.Closed
	return p, nil
}
