package edge

import (
	"context"
	"errors"
	"net/http"
	"sync"

	"github.com/relaydev/relay/edge/follow"
	"github.com/relaydev/relay/relay/chunklog"
	"github.com/relaydev/relay/relay/dialect/chat"
	"github.com/relaydev/relay/relay/wire"
)

// origin is where a client's view of a stream begins.
type origin struct {
	stream chat.Stream
	// after is the last frame the client has; zero for the start.
	after wire.Cursor
	// end is set when that frame is the end frame: nothing follows.
	end *chunklog.Entry
	// f, when set, already follows the stream from after: a stream this
	// edge just started (started.f).
	f *follow.Follower
	// read are frames already taken from f, which the client gets first
	// (a POST /v1/responses that waited for its first frame).
	read []chunklog.Entry
}

// follow returns o's follower: o.f, or a new one after o.after. The caller
// closes it.
func (s *Server) follow(o origin) (*follow.Follower, error) {
	if o.f != nil {
		return o.f, nil
	}
	return s.hub.Follow(o.stream.ID, o.after.JSSeq, s.cfg.ClientBuffer)
}

// open checks that id names a known stream of tenant and that cursor (empty
// for the start) is one of its client-visible frames, before anything is
// streamed: a bad resume is an error response, never a partial replay.
// Another tenant's stream is not found, as an unknown one. idParam and
// cursorParam name the inputs in errors.
//
// Unless the cursor is the end frame, the origin comes with its follower
// (o.f), which the caller closes: it was subscribed, and its first read
// of the history started, before the checks, so that the client's first
// event waits for one round trip to NATS, as do the checks, which are
// made concurrently. Nothing it reads reaches the client unless they
// pass.
func (s *Server) open(ctx context.Context, tenant, id, idParam, cursor, cursorParam string) (origin, *wire.Error) {
	key, e := s.cursorKey(ctx)
	if e != nil {
		return origin{}, e
	}
	after, e := parseResume(key, id, idParam, cursor, cursorParam)
	if e != nil {
		return origin{}, e
	}
	f, err := s.hub.Follow(id, after.JSSeq, s.cfg.ClientBuffer)
	if err != nil {
		return origin{}, unavailable("following the stream", err)
	}
	f.Prefetch(ctx)
	o, e := s.check(ctx, tenant, id, idParam, after, cursor, cursorParam)
	o.stream.Cursors = key
	if e != nil || o.end != nil {
		f.Close()
		return o, e
	}
	o.f = f
	return o, nil
}

// check is open's checks of the stream's Meta and of the frame at the
// cursor, made concurrently; cursor is after as the client sent it.
func (s *Server) check(ctx context.Context, tenant, id, idParam string, after wire.Cursor, cursor, cursorParam string) (origin, *wire.Error) {
	ctx, cancel := context.WithTimeout(ctx, natsTimeout)
	defer cancel()
	var (
		subject string
		frame   wire.Frame
		atErr   error
		at      sync.WaitGroup
	)
	if !after.IsZero() {
		at.Go(func() { subject, frame, atErr = s.reader.At(ctx, id, after.JSSeq) })
	}
	meta, _, err := s.meta.get(ctx, id)
	at.Wait()
	if errors.Is(err, errNoMeta) || err == nil && meta.Tenant != tenant {
		return origin{}, notFound(id, idParam)
	}
	if err != nil {
		return origin{}, unavailable("reading stream metadata", err)
	}
	o := origin{stream: chat.Stream{ID: id, Meta: meta}, after: after}
	if after.IsZero() {
		return o, nil
	}
	switch {
	case errors.Is(atErr, chunklog.ErrNoFrame):
		e := invalid(cursorParam, CodeCursorExpired, "the frame at cursor %s has expired; restart from the beginning", cursor)
		e.Status = http.StatusGone
		return origin{}, e
	case atErr != nil:
		return origin{}, unavailable("reading the frame at the cursor", atErr)
	case subject != wire.ChunkSubject(id) || frame.Seq != after.Seq:
		return origin{}, invalid(cursorParam, CodeCursorMismatch, "cursor %s does not belong to stream %s", cursor, id)
	case frame.Kind == wire.KindEnd:
		o.end = &chunklog.Entry{JSSeq: after.JSSeq, Frame: frame}
	}
	return o, nil
}

// parseResume checks the shape of a resume's stream id and opens its
// cursor with key, before either reaches NATS.
func parseResume(key *wire.CursorKey, id, idParam, cursor, cursorParam string) (wire.Cursor, *wire.Error) {
	if !wire.ValidStreamID(id) {
		return wire.Cursor{}, invalid(idParam, CodeInvalidStreamID, "%q is not a stream id", id)
	}
	after, err := key.Parse(cursor)
	if err != nil {
		return wire.Cursor{}, invalid(cursorParam, CodeInvalidCursor, "%v", err)
	}
	return after, nil
}
