// Package wire is the contract between the relay's roles: the
// JetStream streams and subjects they share, the messages on them, and the
// cursor clients resume with. Every role imports it; nothing else defines a
// subject or a frame.
//
// # Protocol flow
//
//	client ──POST──▶ edge
//	                  │ 1. offer           core relay.offers              (one worker with a free slot takes it,
//	                  │                                                    stores its claim (3.) and answers;
//	                  │                                                    see Offers)
//	                  │ 2. Meta            KV  relay_streams[<id>]       (only if no worker took the offer;
//	                  │                                                    Create: the id is new)
//	                  │ 2. Request         JS  relay.requests             (work queue, Nats-Msg-Id = <id>,
//	                  │                                                    Relay-Taken-By = the taker)
//	                  │    (the client learns the id when the claim or the Meta, and the Request are stored)
//	                  ▼
//	              worker ◀── pull, one message per free slot; InProgress while streaming
//	                  │ 3. claim frame     JS  relay.chunks.<id>          (fences any earlier writer, carries
//	                  │                                                    the Meta; a redelivery reads the
//	                  │                                                    frames first)
//	                  │ 4. chunk frames    JS  relay.chunks.<id>          (seq 1..N, each chained on the last)
//	                  │ 5. end frame       JS  relay.chunks.<id>          (status done|incomplete|failed|cancelled)
//	                  │ 6. ack the request (only while it still owns the stream)
//	                  ▼
//	  the chunk stream of the id's partition (RELAY_CHUNKS, RELAY_CHUNKS_<k>;
//	  see Partitions) republishes every stored frame to relay.live.<id>
//	  with Nats-Sequence and Nats-Last-Sequence headers
//	                  ▼
//	edge ── one core subscription per stream it serves; history and gaps are
//	        read with batched direct gets; every client event carries a Cursor.
//
// # Offers
//
// A worker pulled from the work queue only once the queue's consumer has
// stored, on a quorum, that it delivered the request: one replicated
// round between the queued request and the upstream call. So an edge first
// offers the request over core NATS (OfferSubject); a worker with a free
// slot takes it and starts at once, and answers with its instance once its
// claim frame is stored, while it calls. The edge queues the request
// naming it (HeaderTakenBy) and stores no Meta: the claim carries it
// (ClaimMeta), and was stored before anyone learns the stream's id. The
// work queue stays the record and the recovery path: the worker the queue
// delivers the request to passes the delivery to the taker (AdoptSubject),
// which acknowledges it when the stream ends, and serves it itself if the
// taker no longer does (it died, or its job ended before the delivery
// came: the end frame tells). A request no worker takes is queued with its
// Meta stored as a record, as before. The client sees no difference.
//
// # Fencing
//
// Every frame a worker appends is published with
// Nats-Expected-Last-Subject-Sequence set to the stream sequence of the
// frame before it. A worker that takes a stream over appends a claim frame
// chained on what it read, so the previous owner's next append fails with
// "wrong last sequence" and that worker abandons the stream without acking.
//
// # Cancellation
//
// An edge sets Meta.Cancelled in the stream's Meta record (the durable
// record, created if the claim carried the Meta) and publishes on
// CancelSubject(<id>) (the prompt notice). The worker holding the stream
// closes its upstream call and appends an end frame with status cancelled;
// a worker that takes the request later finds the record first.
//
// # Partitions
//
// The chunk subjects above are partition 0's; partition k stores on
// relay.chunks.<k>.<id> (partition.go).
//
// # Cursors
//
// A client sees chunk frames and the end frame. Each carries a per-stream
// sequence (1, 2, 3, ... without gaps; the end frame is last) and is stored
// at a JetStream sequence of its partition's chunk stream; the pair is the Cursor ("<seq>-<jsseq>"), so a
// resume seeks straight to the next frame and can verify that the cursor
// belongs to the stream.
//
// # Roles of the other packages
//
// This package holds the contract only: names, messages and their
// encodings, with no goroutines and no JetStream calls. Package streams
// creates and checks the streams and buckets named here, package liveness
// runs the heartbeats and handovers whose messages are defined here, and
// package fleet keeps the cluster-wide provider state (state.go names its
// buckets and keys).
package wire
