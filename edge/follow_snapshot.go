package edge

import (
	"context"

	"github.com/relaydev/relay/relay/chunklog"
	"github.com/relaydev/relay/relay/dialect/chat"
	"github.com/relaydev/relay/relay/wire"
)

// A resume with snapshot (snapshot=true, or "snapshot": true in a
// WebSocket resume) does not replay the frames stored before it began one
// event each: it folds them into what was said so far, in the dialect's
// own shape (one chat chunk; the Responses and Anthropic deltas of a part
// folded into one each), which carries the place of the last frame it
// covers, and then serves the live frames as any resume does. The frames
// folded are those up to the stream's last frame when the resume began
// (snapshotThrough); the end frame is never folded: a stream that had
// ended gets its terminal events after the snapshot.

// snapshotThrough is the JetStream sequence of the last frame of o's
// stream stored now: a snapshot folds the frames up to it.
func (s *Server) snapshotThrough(ctx context.Context, o origin) (uint64, *wire.Error) {
	if o.end != nil {
		return 0, nil
	}
	ctx, cancel := context.WithTimeout(ctx, natsTimeout)
	defer cancel()
	last, err := s.reader.Last(ctx, o.stream.ID)
	if err != nil {
		return 0, unavailable("reading the stream's last frame", err)
	}
	return last, nil
}

// folding is the part of a snapshot resume every path shares: which
// frames go into the snapshot. It folds the frames after the client's
// cursor up to through.
type folding struct {
	through uint64
	on      bool
}

func newFolding(after wire.Cursor, through uint64) folding {
	return folding{through: through, on: through > after.JSSeq}
}

// take reports whether e goes into the snapshot, and whether the
// snapshot is complete once it did (or, for the end frame, before it).
func (p *folding) take(e chunklog.Entry) (fold, done bool) {
	if !p.on {
		return false, false
	}
	if e.Frame.Kind == wire.KindEnd {
		p.on = false
		return false, true
	}
	p.on = e.JSSeq < p.through
	return true, !p.on
}

// finish reports whether a snapshot was being folded, and ends it.
func (p *folding) finish() bool {
	on := p.on
	p.on = false
	return on
}

// snapshotter is an eventDialect that folds frames into a snapshot.
type snapshotter interface {
	eventDialect
	// fold takes frame e into the snapshot.
	fold(out *sseWriter, e chunklog.Entry)
	// snapshot writes what fold took, if anything, and stops folding.
	snapshot(out *sseWriter)
}

// snapshotEvents serves a snapshot resume over SSE in dialect d.
type snapshotEvents struct {
	d snapshotter
	p folding
}

func newSnapshotEvents(d snapshotter, after wire.Cursor, through uint64) *snapshotEvents {
	return &snapshotEvents{d: d, p: newFolding(after, through)}
}

func (s *snapshotEvents) begin(out *sseWriter) { s.d.begin(out) }

func (s *snapshotEvents) frame(out *sseWriter, e chunklog.Entry) {
	fold, done := s.p.take(e)
	if fold {
		s.d.fold(out, e)
	}
	if done {
		s.d.snapshot(out)
	}
	if !fold {
		s.d.frame(out, e)
	}
}

func (s *snapshotEvents) end(out *sseWriter) { s.d.end(out) }

func (s *snapshotEvents) cut(out *sseWriter, e *wire.Error) {
	if s.p.finish() {
		s.d.snapshot(out)
	}
	s.d.cut(out, e)
}

// ping is due when the follower had nothing for a while: nothing more is
// coming to fold, so the snapshot goes first.
func (s *snapshotEvents) ping(out *sseWriter) {
	if s.p.finish() {
		s.d.snapshot(out)
	}
	if p, ok := s.d.(pinger); ok {
		p.ping(out)
		return
	}
	out.keepalive()
}

// chatSnapshot is chatEvents folding into a chat.Snapshot.
type chatSnapshot struct {
	*chatEvents
	p chat.Snapshot
}

func (c *chatSnapshot) fold(_ *sseWriter, e chunklog.Entry) { c.p.Add(cursorOf(e), e.Frame) }

func (c *chatSnapshot) snapshot(out *sseWriter) {
	if c.p.Empty() {
		return
	}
	out.cursorEvent(c.s.Cursors, c.p.At(), func(b []byte) []byte { return append(b, marshal(c.s.SnapshotChunk(&c.p))...) })
	c.p = chat.Snapshot{}
}

// fold renders e with the Renderer folding its deltas.
func (d responseEvents) fold(out *sseWriter, e chunklog.Entry) {
	d.r.Fold()
	d.frame(out, e)
}

func (d responseEvents) snapshot(out *sseWriter) { d.r.Unfold(responsesWriter{out}) }

// fold renders e with the Events folding their deltas.
func (m messageEvents) fold(out *sseWriter, e chunklog.Entry) {
	m.Fold()
	m.frame(out, e)
}

func (m messageEvents) snapshot(out *sseWriter) { m.Unfold(out) }

// resumeDialect is d, or d folding a snapshot when snap is set. On an
// error it closes o's follower.
func (s *Server) resumeDialect(ctx context.Context, o origin, d snapshotter, snap bool) (eventDialect, *wire.Error) {
	if !snap {
		return d, nil
	}
	through, e := s.snapshotThrough(ctx, o)
	if e != nil {
		if o.f != nil {
			o.f.Close()
		}
		return nil, e
	}
	return newSnapshotEvents(d, o.after, through), nil
}
