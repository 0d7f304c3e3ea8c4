package chunklog

import (
	"context"

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
