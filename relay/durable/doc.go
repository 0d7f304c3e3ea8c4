// Package durable stores Durable Streams (the protocol edge/durable
// serves) in the relay's own log: a stream is a relay stream whose frames
// are the stream's appends, so the relay's readers (GET /v1/streams/{id},
// /v1/ws) follow it too.
//
//	PUT    a Record in wire.MetaBucket under a key of (tenant, path),
//	       naming a fresh stream id; a claim frame on its chunk subject
//	       with the tenant, then the initial data and closure, if any
//	POST   a chunk frame with the data as its content, chained on the
//	       stream's last frame (expected-last-subject-sequence), carrying
//	       the stream's writer state (producers, Stream-Seq) after it;
//	       closure is an end frame with status done
//	GET    the chunk frames after an offset (wire.Offset), stitched with a
//	       fork's source up to the fork's offset
//
// An append reads the stream's last frame, checks the request against the
// state that frame carries, and stores the next frame only if nothing was
// stored since: a refused append reads again. So any edge may append, two
// appends are never both accepted against one state, and a producer's
// (id, epoch, seq) is checked and recorded in one step.
package durable
