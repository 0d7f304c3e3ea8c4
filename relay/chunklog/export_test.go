package chunklog

import (
	"context"

	"github.com/nats-io/nats.go"

	"github.com/relaydev/relay/relay/wire"
)

// BackReads is how many of r's reads followed the chain back.
func BackReads(r *Reader) uint64 { return r.backReads.Load() }

// JudgeAfter is how many steps back a read takes before it judges how far
// apart the frames lie.
const JudgeAfter = judgeAfter

// ReadForward reads as ReadUpTo does where it does not follow the chain.
func ReadForward(r *Reader, ctx context.Context, streamID string, after uint64, limit int, fn func(Entry) error) (uint64, error) {
	return r.readForward(ctx, wire.ChunkSubject(streamID), after, limit, fn)
}

// Hold makes c queue every append until release is called, which sends
// what queued meanwhile as batches, so that a test decides what goes in
// one.
func Hold(c *Committer) (release func()) {
	c.mu.Lock()
	c.busy = true
	c.mu.Unlock()
	return c.loop
}

// Queued is how many appends wait in c.
func Queued(c *Committer) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.queue)
}

// BatchMsg is message n of the atomic batch id, carrying data fenced on
// last, not its commit.
func BatchMsg(subject string, data []byte, last uint64, id string, n int) *nats.Msg {
	return batchMsg(&pending{subject: subject, data: data, last: last}, id, n, false)
}
