package worker

import (
	"github.com/relaydev/relay/relay/fleet"
	"github.com/relaydev/relay/relay/provider"
	"github.com/relaydev/relay/relay/wire"
)

// routed is where a stream went: the first candidate of its route, and
// the one it ended on (its last call, or the last candidate refused).
type routed struct {
	first, last provider.Candidate
}

// judge tells the Router that ordered the stream's route, if it judges
// routes (fleet.Judge), how the stream ended for its client: a canary is
// judged by what its clients see, a failed call that a fallback rescued
// being no failure of the stream. A stream that never walked a route (a
// model not served, a cut answer with tool calls taken over) is not told.
func (j *job) judge(status wire.Status) {
	r, ok := routerOf(j.w.gate)
	if !ok || j.routed == nil {
		return
	}
	if judge, ok := r.(fleet.Judge); ok {
		judge.StreamEnded(fleet.StreamEnd{StreamID: j.req.StreamID, Model: j.req.Model, First: j.routed.first, Last: j.routed.last, Status: status})
	}
}
