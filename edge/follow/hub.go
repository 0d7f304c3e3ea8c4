package follow

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/nats-io/nats.go"

	"github.com/relaydev/relay/relay/chunklog"
	"github.com/relaydev/relay/relay/wire"
)

// hubQueue is the capacity of the one channel every live subscription of an
// edge delivers into. A channel subscription has no pending limits of its
// own: nats.go drops a message when the channel is full, so it is sized for
// bursts across all streams, and the hub tells followers to re-read the log
// when it was ever full.
const hubQueue = 1 << 16

// Hub fans live frames out to the followers on this edge: one core
// subscription per stream served here, however many clients follow it, all
// delivering into one channel that one dispatcher goroutine routes. No
// goroutine and no JetStream consumer is created per stream or per client.
// With it goes a subscription to the stream's presence subject, so that
// any edge can ask whether the stream is followed (answer).
//
// The dispatcher lives as long as the NATS connection: it stops when the
// connection is closed.
type Hub struct {
	nc   *nats.Conn
	hist History
	// ordered is set when requests are published on nc: the server then
	// processes a subscription made before a request before the request.
	ordered bool
	log     *slog.Logger
	msgs    chan *nats.Msg
	asks    chan *nats.Msg
	status  chan nats.Status

	mu      sync.RWMutex
	streams map[string]*hubStream

	stats readStats
}

// hubStream is one stream's subscriptions and the followers it feeds.
type hubStream struct {
	sub       *nats.Subscription // live frames
	ask       *nats.Subscription // presence questions
	followers map[*Follower]struct{}
}

// readStats counts how the read path coped (Stats).
type readStats struct {
	// dropped counts live frames not queued because a follower's queue was
	// full; the follower re-reads them from the log.
	dropped atomic.Uint64
	// resyncs counts the times every follower was told to re-read the log:
	// after a reconnect, or after the hub channel filled up.
	resyncs atomic.Uint64
	// catchUps counts catch-ups with the log, by what triggered them: a
	// re-read, or, for woken and idle ones, a look at the stream's last
	// frame that may find nothing to read.
	catchUps [numCatchUpReasons]atomic.Uint64
	// reads counts reads of the log (direct gets after a frame), and
	// readRetries those that failed and were retried.
	reads, readRetries atomic.Uint64
	// staleReads counts the reads that stopped short of a frame the live
	// feed proved stored (a replica behind the leader) and were made again.
	staleReads atomic.Uint64
	// maxHeld is the most frames the edge held for one client at once: a
	// batch returned by Follower.Next and what stayed queued behind it. It
	// is bounded by twice the buffer (at least MinBatch + buffer),
	// however far behind a client is.
	maxHeld atomic.Uint64
}

// Stats is a snapshot of how the read path coped; the edge exports it as
// metrics.
type Stats struct {
	// Dropped counts live frames not queued because a follower's queue was
	// full; the follower re-reads them from the log.
	Dropped uint64
	// Resyncs counts the times every follower was told to re-read the log:
	// after a reconnect, or after the hub channel filled up.
	Resyncs uint64
	// Gaps, Woken and Idle count catch-ups with the log by what triggered
	// them: a live frame that did not follow the last one; a follower the
	// hub dropped frames for, or a resync; nothing arriving for the idle
	// interval.
	Gaps, Woken, Idle uint64
	// Reads counts reads of the log, ReadRetries those that failed and
	// were retried, StaleReads those made again because a replica was
	// behind the live feed.
	Reads, ReadRetries, StaleReads uint64
	// MaxHeld is the most frames held for one client at once.
	MaxHeld uint64
}

// Stats returns the read stats so far.
func (h *Hub) Stats() Stats {
	s := &h.stats
	return Stats{
		Dropped:     s.dropped.Load(),
		Resyncs:     s.resyncs.Load(),
		Gaps:        s.catchUps[catchUpGap].Load(),
		Woken:       s.catchUps[catchUpWoken].Load(),
		Idle:        s.catchUps[catchUpIdle].Load(),
		Reads:       s.reads.Load(),
		ReadRetries: s.readRetries.Load(),
		StaleReads:  s.staleReads.Load(),
		MaxHeld:     s.maxHeld.Load(),
	}
}

// held records that n frames were held for one client.
func (s *readStats) held(n int) {
	for {
		old := s.maxHeld.Load()
		if uint64(n) <= old || s.maxHeld.CompareAndSwap(old, uint64(n)) {
			return
		}
	}
}

// catchUpReason says why a follower re-read the log after the frame it
// had.
type catchUpReason int

const (
	// catchUpGap: a live frame did not follow the last one (a message was
	// lost, or a queue overflowed and later frames were queued again).
	catchUpGap catchUpReason = iota
	// catchUpWoken: the hub dropped frames for this follower, or asked every
	// follower to re-read.
	catchUpWoken
	// catchUpIdle: nothing arrived for a keepalive interval; the re-read
	// finds frames whose live copy never arrived (e.g. a history read served
	// by a lagging replica).
	catchUpIdle
	numCatchUpReasons
)

// New returns the hub of the edge's connection nc, reading the log with
// hist. ordered is set when the edge publishes its requests on nc. The
// hub's dispatcher runs until nc is closed.
func New(nc *nats.Conn, hist History, ordered bool, log *slog.Logger) *Hub {
	h := &Hub{
		nc:      nc,
		hist:    hist,
		ordered: ordered,
		log:     log,
		msgs:    make(chan *nats.Msg, hubQueue),
		asks:    make(chan *nats.Msg, askQueue),
		status:  nc.StatusChanged(nats.CONNECTED, nats.CLOSED),
		streams: map[string]*hubStream{},
	}
	go h.run()
	return h
}

// Follow returns a follower of stream id that starts after JetStream
// sequence after. It is subscribed before it reads any history, so nothing
// stored meanwhile is missed. The caller must close it.
func (h *Hub) Follow(id string, after uint64, buffer int) (*Follower, error) {
	f := newFollower(h, id, after, buffer)
	h.mu.Lock()
	defer h.mu.Unlock()
	hs := h.streams[id]
	if hs == nil {
		sub, err := h.nc.ChanSubscribe(wire.LiveSubject(id), h.msgs)
		if err != nil {
			return nil, fmt.Errorf("follow: subscribe %s: %w", wire.LiveSubject(id), err)
		}
		ask, err := h.nc.ChanSubscribe(wire.PresenceSubject(id), h.asks)
		if err != nil {
			sub.Unsubscribe()
			return nil, fmt.Errorf("follow: subscribe %s: %w", wire.PresenceSubject(id), err)
		}
		hs = &hubStream{sub: sub, ask: ask, followers: map[*Follower]struct{}{}}
		h.streams[id] = hs
	}
	hs.followers[f] = struct{}{}
	return f, nil
}

// FollowNew returns a follower of stream id, which has no frames yet: the
// caller queues the request that starts the stream only after this
// returns. The live subscription then sees every frame stored (and a lost
// one as a gap), so the follower reads no history first: a new stream
// costs the log no read. Like Follow, the caller must close it.
func (h *Hub) FollowNew(ctx context.Context, id string, buffer int) (*Follower, error) {
	f, err := h.Follow(id, 0, buffer)
	if err != nil {
		return nil, err
	}
	f.phase = live
	if !h.ordered {
		// The request goes out on another connection: only a round trip
		// on this one makes sure the server has the subscription first.
		if err := h.nc.FlushWithContext(ctx); err != nil {
			f.Close()
			return nil, fmt.Errorf("follow: subscribe %s: %w", wire.LiveSubject(id), err)
		}
	}
	return f, nil
}

// leave removes f, and the stream's subscriptions with its last follower.
func (h *Hub) leave(f *Follower) {
	h.mu.Lock()
	defer h.mu.Unlock()
	hs := h.streams[f.id]
	if hs == nil {
		return
	}
	delete(hs.followers, f)
	if len(hs.followers) == 0 {
		for _, sub := range []*nats.Subscription{hs.sub, hs.ask} {
			if err := sub.Unsubscribe(); err != nil && !h.nc.IsClosed() {
				h.log.Warn("unsubscribe", "subject", sub.Subject, "err", err)
			}
		}
		delete(h.streams, f.id)
	}
}

// Streams is how many streams the hub is subscribed to.
func (h *Hub) Streams() int {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return len(h.streams)
}

func (h *Hub) run() {
	defer h.nc.RemoveStatusListener(h.status)
	saturated := false
	for {
		select {
		case m := <-h.msgs:
			// Just after a receive the channel can hold at most cap-1
			// messages; holding that many means it was full, and nats.go
			// may have dropped messages for any stream.
			if len(h.msgs) >= cap(h.msgs)-1 {
				saturated = true
			}
			h.dispatch(m)
			if saturated && len(h.msgs) == 0 {
				saturated = false
				h.resync()
			}
		case m := <-h.asks:
			h.answer(m)
		case st := <-h.status:
			switch st {
			case nats.CLOSED:
				return
			case nats.CONNECTED:
				// Live messages published while disconnected are lost.
				h.resync()
			}
		}
	}
}

func (h *Hub) dispatch(m *nats.Msg) {
	id, _ := wire.StreamIDFromLive(m.Subject)
	h.mu.RLock()
	defer h.mu.RUnlock()
	hs := h.streams[id]
	if hs == nil {
		return
	}
	lf, err := decodeLive(m)
	if err != nil {
		// Followers see the next frame's gap and read this one from the
		// log, where it fails loudly.
		h.log.Warn("undecodable live frame", "stream_id", id, "err", err)
		return
	}
	lf.refs.Store(int32(len(hs.followers)))
	for f := range hs.followers {
		if !f.push(lf) {
			lf.release()
			h.stats.dropped.Add(1)
			f.wakeUp()
		}
	}
}

// resync tells every follower to re-read the log after its last frame.
func (h *Hub) resync() {
	h.stats.resyncs.Add(1)
	h.mu.RLock()
	defer h.mu.RUnlock()
	for _, hs := range h.streams {
		for f := range hs.followers {
			f.wakeUp()
		}
	}
}

// liveFrame is one frame republished by RELAY_CHUNKS, decoded once and
// shared read-only by every follower of its stream.
type liveFrame struct {
	entry chunklog.Entry
	// prev is Nats-Last-Sequence: the JetStream sequence of the frame
	// stored before this one on the same subject, 0 for the first.
	prev uint64
	// refs counts the followers the frame was queued for that have not
	// taken it yet; the last to take it returns it to liveFrames.
	refs atomic.Int32
}

// liveFrames holds live frames between uses: one is decoded for every
// token of every stream followed here, and a frame is about 500 bytes.
// A frame left queued for a follower that was closed is not returned; the
// garbage collector takes it.
var liveFrames = sync.Pool{New: func() any { return new(liveFrame) }}

// release lets go of a frame a follower has taken (or could not queue).
func (lf *liveFrame) release() {
	if lf.refs.Add(-1) == 0 {
		lf.entry, lf.prev = chunklog.Entry{}, 0
		liveFrames.Put(lf)
	}
}

func decodeLive(m *nats.Msg) (*liveFrame, error) {
	seq, err := strconv.ParseUint(m.Header.Get(wire.HeaderSequence), 10, 64)
	if err != nil {
		return nil, fmt.Errorf("follow: %s header: %w", wire.HeaderSequence, err)
	}
	prev, err := strconv.ParseUint(m.Header.Get(wire.HeaderLastSequence), 10, 64)
	if err != nil {
		return nil, fmt.Errorf("follow: %s header: %w", wire.HeaderLastSequence, err)
	}
	frame, err := wire.DecodeFrame(m.Data)
	if err != nil {
		return nil, err
	}
	lf := liveFrames.Get().(*liveFrame)
	lf.entry, lf.prev = chunklog.Entry{JSSeq: seq, Frame: frame}, prev
	return lf, nil
}
