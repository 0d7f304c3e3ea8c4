package wire

import (
	"strconv"
	"time"
)

// Worker liveness (see the package doc): heartbeats on LivenessSubject,
// and one handover record per delivery in HandoverBucket, so that
// however many watchers see a worker fall silent, each of its deliveries
// gets one NAK. A second NAK would not be harmless: acks and NAKs are
// matched by the request's sequence only, so it would take the request
// from the worker that just received it.
const (
	// LivenessSubject carries every worker's heartbeats.
	LivenessSubject = "relay.liveness"
	// LivenessSyncSubject is where a watcher that lacks a worker's set of
	// deliveries (it just started, reconnected or missed a beat) asks for
	// a full heartbeat, which comes at the worker's next interval. The
	// payload is the instance asked, or empty for every worker.
	LivenessSyncSubject = "relay.liveness.sync"
	// livenessProbePrefix is followed by a worker instance: a watcher that
	// finds the instance silent asks it there whether it lives before
	// taking its requests (LivenessProbeSubject).
	livenessProbePrefix = "relay.liveness.probe."
	// HandoverBucket holds one key per handed-over delivery
	// (Delivery.HandoverKey); keys expire after a retention that outlives
	// any heartbeat still in flight.
	HandoverBucket = "relay_handovers"

	// DefaultLivenessTimeout is a watcher's timeout for a heartbeat that
	// declares none.
	DefaultLivenessTimeout = 1500 * time.Millisecond
	// minLivenessTimeout bounds what a heartbeat may declare, so a
	// misconfigured worker cannot have its requests handed over on every
	// scheduling hiccup.
	minLivenessTimeout = 100 * time.Millisecond
)

// LivenessProbeSubject is where a worker instance answers, with an empty
// reply, for as long as its liveness connection lives. A request that
// nobody answers gets NATS's no-responders status at once: the worker's
// connection is gone, a definite answer; one that times out means the
// worker is alive to the server but unable to answer (paused, starved).
func LivenessProbeSubject(instance string) string { return livenessProbePrefix + instance }

// Heartbeat is what a worker publishes on LivenessSubject. It is full
// (Full: Deliveries lists every delivery the worker holds) on the
// instance's first beat and then every few seconds, and a delta in
// between (Added and Removed since the beat before, numbered Beat-1), so
// that its size follows the churn of requests, not how many are in
// flight. A watcher applies a delta only on top of the beat before it
// (see "Worker liveness").
type Heartbeat struct {
	// Worker is the worker's configured id (logs only).
	Worker string `json:"worker"`
	// Instance is unique per worker process, so a restarted worker with
	// the same id does not keep its dead predecessor alive.
	Instance string `json:"instance"`
	// TimeoutMS is how long watchers wait after this heartbeat before they
	// hand the deliveries over; the worker's own setting, so that every
	// watcher applies the same one.
	TimeoutMS int64 `json:"timeout_ms"`
	// Beat numbers the instance's heartbeats from 1, without gaps: a
	// watcher that sees one missing knows its view of the deliveries is
	// out of date.
	Beat uint64 `json:"beat"`
	// Leaving says the worker stopped after finishing or handing over its
	// requests itself: watchers forget it without handing anything over.
	Leaving bool `json:"leaving,omitempty"`
	// Full says Deliveries is the whole set the worker holds; otherwise
	// the heartbeat is a delta.
	Full bool `json:"full,omitempty"`
	// Deliveries are the requests the worker holds (full heartbeats only).
	Deliveries []Delivery `json:"deliveries,omitempty"`
	// Added and Removed are the deliveries the worker took and let go of
	// since beat Beat-1 (deltas only).
	Added   []Delivery    `json:"added,omitempty"`
	Removed []DeliveryRef `json:"removed,omitempty"`
	// Held is how many deliveries the worker holds after this beat, in
	// every heartbeat: a watcher checks its set against it, and a
	// dashboard can show it without keeping the set.
	Held int `json:"held"`
	// Capacity is how many requests the worker runs at once
	// (worker.max_inflight): with Held and each delivery's Tenant, an
	// edge sees how the fleet's slots are shared between tenants
	// (edge/admit_tenant_gate.go).
	Capacity int `json:"capacity,omitempty"`
}

// Timeout is the declared timeout, defaulted and bounded below.
func (hb Heartbeat) Timeout() time.Duration {
	if hb.TimeoutMS <= 0 {
		return DefaultLivenessTimeout
	}
	return max(time.Duration(hb.TimeoutMS)*time.Millisecond, minLivenessTimeout)
}

// Delivery is one delivery of a request to a worker.
type Delivery struct {
	StreamID string `json:"stream_id"`
	// Reply is the delivery's ack subject (jetstream.Msg.Reply).
	Reply string `json:"reply"`
	// Seq is the request's sequence in RequestStream and Delivered its
	// delivery count; together they name the delivery.
	Seq       uint64 `json:"seq"`
	Delivered uint64 `json:"delivered"`
	// Tenant is the request's tenant, for the edges' fair sharing of the
	// workers' slots; the watchers that hand deliveries over ignore it.
	Tenant string `json:"tenant,omitempty"`
}

// DeliveryRef names a delivery without its details: the request's
// sequence and its delivery count.
type DeliveryRef struct {
	Seq       uint64 `json:"seq"`
	Delivered uint64 `json:"delivered"`
}

// Ref names d.
func (d Delivery) Ref() DeliveryRef { return DeliveryRef{Seq: d.Seq, Delivered: d.Delivered} }

// HandoverKey names the delivery in HandoverBucket.
func (d Delivery) HandoverKey() string {
	return strconv.FormatUint(d.Seq, 10) + "." + strconv.FormatUint(d.Delivered, 10)
}
