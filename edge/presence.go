package edge

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/relaydev/relay/relay/wire"
)

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
	id, _ := wire.StreamIDFromPresence(m.Subject)
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
	_, err := nc.RequestWithContext(ctx, wire.PresenceSubject(id), nil)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, nats.ErrNoResponders):
		return false, nil
	}
	return false, fmt.Errorf("%w: %s: %v", errPresenceUnknown, id, err)
}
