package wire

import "strings"

// JetStream names shared by every role. They are constants rather than
// configuration because every process in a cluster must agree on them.
const (
	// RequestStream is the work queue of generation requests.
	RequestStream = "RELAY_REQUESTS"
	// RequestSubject carries one Request per generation.
	RequestSubject = "relay.requests"
	// WorkerConsumer is the durable pull consumer all workers share.
	WorkerConsumer = "workers"

	// ChunkStream stores streams' frames, one subject per stream: the
	// first partition's, and the prefix of the others' names (see
	// "Partitions" in partition.go).
	ChunkStream = "RELAY_CHUNKS"
	// chunkPrefix and livePrefix are followed by the stream id.
	chunkPrefix  = "relay.chunks."
	livePrefix   = "relay.live."
	cancelPrefix = "relay.cancel."
	// presencePrefix is published and answered by edges only; NATS
	// permissions must let an edge publish and subscribe to
	// relay.presence.>.
	presencePrefix = "relay.presence."

	// ForwardSubject carries the requests the relay forwards without a
	// durable stream (/v1/embeddings, /v1/completions): an edge publishes
	// one ForwardRequest with a reply subject made by ForwardReplySubject,
	// and one worker of the queue group ForwardQueue takes it. NATS
	// permissions must let an edge publish it and subscribe to
	// relay.forward.reply.>, and a worker subscribe to it (queue
	// ForwardQueue) and publish to relay.forward.reply.>.
	ForwardSubject = "relay.forward"
	// ForwardQueue is the queue group of every worker on ForwardSubject.
	ForwardQueue = "relay-forward"
	// forwardReplyPrefix is followed by one token per forwarded request.
	forwardReplyPrefix = "relay.forward.reply."

	// OfferSubject is where an edge offers a generation request to a
	// worker with a free slot before it queues it (see "Offers" in the
	// package doc): a request whose data is the encoded Request, answered
	// by one worker of the queue group OfferQueue with its instance (it
	// took the request) or with nothing (it has no free slot). NATS
	// permissions must let an edge publish it, and a worker subscribe to
	// it (queue OfferQueue) and answer.
	OfferSubject = "relay.offers"
	// OfferQueue is the queue group of every worker on OfferSubject.
	OfferQueue = "relay-offers"
	// adoptPrefix is followed by a worker's instance.
	adoptPrefix = "relay.adopt."

	// GateSubjects are where the edges tell each other, on
	// relay.gate.<node>, the tenants' requests waiting in their lines and
	// let start (edge/admit_tenant_gate.go): core NATS, nothing stored,
	// since a report is only worth its latest. NATS permissions must let
	// an edge publish its own and subscribe to all.
	GateSubjects = "relay.gate.*"
	gatePrefix   = "relay.gate."

	// MetaBucket is the KV bucket of stream metadata, keyed by stream id.
	MetaBucket = "relay_streams"
	// HealthBucket holds the coordinator's last probe of each provider,
	// keyed by provider name.
	HealthBucket = "relay_health"
	// UsageBucket is the ledger of tenants' usage: one record per stream
	// that used tokens, written once by the worker that ended it
	// (relay/spend).
	UsageBucket = "relay_usage"
)

// LiveSubject is the core subject every chunk stream republishes a
// stream's frames to once they are stored.
func LiveSubject(streamID string) string { return livePrefix + streamID }

// CancelSubject is the core subject on which an edge tells the worker
// generating a stream to stop. A notice is fire-and-forget; the durable
// record of a cancellation is Meta.Cancelled, which a worker reads when it
// takes a request, so a cancellation is not lost while no worker holds it.
func CancelSubject(streamID string) string { return cancelPrefix + streamID }

// PresenceSubject is where an edge answers, with an empty reply, for as
// long as one of its clients follows the stream: the subscription is made
// with the stream's live subscription and dropped with its last follower.
// A request that nobody answers gets NATS's no-responders status at once,
// so "nobody follows" is a definite answer and not a timeout.
func PresenceSubject(streamID string) string { return presencePrefix + streamID }

// GateSubject is the subject edge node reports its lines on.
func GateSubject(node string) string { return gatePrefix + node }

// ForwardReplySubject is the core subject where the worker that took a
// forwarded request answers it (see ForwardKind), token being unique to the
// request's attempt.
func ForwardReplySubject(token string) string { return forwardReplyPrefix + token }

// IsForwardReplySubject reports whether subject is one ForwardReplySubject
// makes: a worker answers nowhere else, whatever reply a message names.
func IsForwardReplySubject(subject string) bool {
	token, ok := strings.CutPrefix(subject, forwardReplyPrefix)
	return ok && token != "" && !strings.ContainsAny(token, ".*> \t\r\n")
}

// AdoptSubject is where the worker instance that took a request by an
// offer is passed its delivery by the worker the work queue gave it to: a
// request whose data is the Delivery, answered "1" if the instance still
// serves the stream and adopts the delivery, or with nothing if it does
// not (its job ended, or never started), and the sender then serves the
// delivery itself. Workers must be allowed to publish and subscribe to
// relay.adopt.>.
func AdoptSubject(instance string) string { return adoptPrefix + instance }

// ValidInstance reports whether instance can name a worker in
// AdoptSubject: one subject token of at most 64 bytes.
func ValidInstance(instance string) bool {
	return instance != "" && len(instance) <= 64 && !strings.ContainsAny(instance, ".*> \t\r\n")
}

// HeaderTakenBy, on a queued request, names the worker instance that took
// it by an offer (OfferSubject) and serves it already.
const HeaderTakenBy = "Relay-Taken-By"

// StreamIDFromPresence returns the stream id of a presence subject.
func StreamIDFromPresence(subject string) (string, bool) {
	return strings.CutPrefix(subject, presencePrefix)
}

// StreamIDFromLive returns the stream id of a live subject.
func StreamIDFromLive(subject string) (string, bool) {
	return strings.CutPrefix(subject, livePrefix)
}

// Headers set by JetStream on republished and directly fetched messages.
const (
	HeaderSequence     = "Nats-Sequence"
	HeaderLastSequence = "Nats-Last-Sequence"
	HeaderSubject      = "Nats-Subject"
	HeaderNumPending   = "Nats-Num-Pending"
)
