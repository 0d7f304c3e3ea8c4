// Package chunklog reads and appends a stream's frames in JetStream: the
// durable log every client event is served from.
//
// Reads use direct gets, so a resume costs no consumer and keeps working
// while the meta group is busy or down. They follow a stream's frames back
// from its last one, each frame naming the one stored before it, where
// the frames lie far apart among other streams' (see Reader.ReadUpTo), and
// read forward (plain gets, then batched) where they lie close. In a
// replicated stream any replica answers a direct get, and one may not hold
// yet a frame the leader acknowledged: a miss of a frame known to exist (At,
// given a cursor) is confirmed with the leader (LeaderGet) before it counts
// as gone. Appends
// are chained with expected-last-subject-sequence, so at most one writer
// can extend a stream at a time (see the wire package's "Fencing"); each
// is a core request whose ack the writer reads itself (Conn, parseAck),
// as it is made for every chunk. On a replicated stream a worker's
// writers append through one Committer, which sends what they append
// meanwhile as one atomic batch, one round of the stream's raft group for
// all of them (commit.go).
package chunklog
