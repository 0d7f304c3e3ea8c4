package edge

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

// presencePrefix starts the core subject on which edges say whether one of
// their clients follows a stream. Only edges publish and answer on it, so
// it is defined here rather than in protocol (which other packages own);
// it belongs next to protocol.CancelSubject once protocol adopts it, and
// NATS permissions must let an edge publish and subscribe to relay.presence.>.
const presencePrefix = "relay.presence."

// presenceSubject is where an edge's hub answers, with an empty reply, for as
// long as it has a follower of stream id: the subscription is made with the
// stream's live subscription and dropped with its last follower. A request
// that nobody answers gets NATS's no-responders status at once, so "nobody
// follows" is a definite answer and not a timeout.
func presenceSubject(id string) string { return presencePrefix + id }

// askQueue is the capacity of the channel every presence subscription of an
// edge delivers into. Questions are rare (one per abandoned stream per
// cancel_after interval); a question dropped on a full queue goes
// unanswered, which the asker treats as "unknown", never as "nobody".
const askQueue = 1024

// presenceTimeout bounds one presence question. Subscribers exist for the
// subject when it runs out, so it only fires when an edge is overloaded or
// cut off; the answer is then unknown.
const presenceTimeout = time.Second

// answer replies to a presence question for a stream this hub has
// followers of. A question still queued after the last follower left is
// not answered. A cancel request waiting for a stream's end counts as a
// follower; it only defers a cancellation that is already under way.
func (h *hub) answer(m *nats.Msg) {
	id, _ := strings.CutPrefix(m.Subject, presencePrefix)
	h.mu.RLock()
	hs := h.streams[id]
	followed := hs != nil && len(hs.followers) > 0
	h.mu.RUnlock()
	if !followed {
		return
	}
	if err := m.Respond(nil); err != nil && !h.nc.IsClosed() {
		h.log.Warn("answer presence", "stream_id", id, "err", err)
	}
}

// errPresenceUnknown is returned by followed when no definite answer came.
var errPresenceUnknown = errors.New("edge: presence unknown")

// followed asks every edge, this one included, whether a client follows
// stream id. It reports false only on NATS's no-responders status.
func followed(ctx context.Context, nc *nats.Conn, id string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, presenceTimeout)
	defer cancel()
	_, err := nc.RequestWithContext(ctx, presenceSubject(id), nil)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, nats.ErrNoResponders):
		return false, nil
	}
	return false, fmt.Errorf("%w: %s: %v", errPresenceUnknown, id, err)
}
