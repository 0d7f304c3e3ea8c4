package chunklog

import (
	"context"

	"github.com/nats-io/nats.go"
)

// BackReads is how many of r's reads followed the chain back.
func BackReads(r *Reader) uint64 { return r.backReads.Load() }

// JudgeAfter is how many steps back a read takes before it judges how far
// apart the frames lie.
const JudgeAfter = judgeAfter

// ReadForward reads as ReadUpTo does where it does not follow the chain.
func ReadForward(r *Reader, ctx context.Context, streamID string, after uint64, limit int, fn func(Entry) error) (uint64, error) {
	return r.readForward(ctx, placeOf(streamID), after, limit, fn)
}

// Hold makes c queue every append to partition k until release is
// called, which sends what queued meanwhile as batches, so that a test
// decides what goes in one.
func Hold(c *Committer, k int) (release func()) {
	l := &c.lanes[k]
	l.mu.Lock()
	l.busy = true
	l.mu.Unlock()
	return l.loop
}

// Queued is how many appends to partition k wait in c.
func Queued(c *Committer, k int) int {
	l := &c.lanes[k]
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.queue)
}

// BatchMsg is message n of the atomic batch id, carrying data fenced on
// last, not its commit.
func BatchMsg(subject string, data []byte, last uint64, id string, n int) *nats.Msg {
	return batchMsg(&pending{subject: subject, data: data, last: last}, id, n, false)
}
