package follow

import (
	"github.com/nats-io/nats.go"

	"github.com/relaydev/relay/relay/wire"
)

// askQueue is the capacity of the channel every presence subscription of an
// edge delivers into. Questions are rare (one per abandoned stream per
// cancel_after interval); a question dropped on a full queue goes
// unanswered, which the asker treats as "unknown", never as "nobody".
const askQueue = 1024

// answer replies to a presence question for a stream this hub has
// followers of. A question still queued after the last follower left is
// not answered. A cancel request waiting for a stream's end counts as a
// follower; it only defers a cancellation that is already under way.
func (h *Hub) answer(m *nats.Msg) {
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
