package protocol

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
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
	// livenessEchoPrefix starts the subject on which a watcher sends
	// itself an echo; a relay subject rather than an inbox, so that no role
	// needs a grant to publish to inboxes (configs/nats).
	livenessEchoPrefix = "relay.liveness.echo."
	// HandoverBucket holds one key per handed-over delivery
	// (Delivery.HandoverKey); keys expire after handoverRetention.
	HandoverBucket = "relay_handovers"
	// handoverRetention outlives any heartbeat still in flight when a
	// delivery is handed over, so a late copy cannot hand it over twice.
	handoverRetention = 10 * time.Minute

	// DefaultLivenessTimeout is a watcher's timeout for a heartbeat that
	// declares none.
	DefaultLivenessTimeout = 1500 * time.Millisecond
	// minLivenessTimeout bounds what a heartbeat may declare, so a
	// misconfigured worker cannot have its requests handed over on every
	// scheduling hiccup.
	minLivenessTimeout = 100 * time.Millisecond
)

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
}

// DeliveryRef names a delivery without its details: the request's
// sequence and its delivery count.
type DeliveryRef struct {
	Seq       uint64 `json:"seq"`
	Delivered uint64 `json:"delivered"`
}

// Ref names d.
func (d Delivery) Ref() DeliveryRef { return DeliveryRef{Seq: d.Seq, Delivered: d.Delivered} }

// DeliveryOf describes msg, a request delivered by the worker consumer.
func DeliveryOf(msg jetstream.Msg, streamID string) (Delivery, error) {
	md, err := msg.Metadata()
	if err != nil {
		return Delivery{}, fmt.Errorf("protocol: delivery metadata: %w", err)
	}
	return Delivery{StreamID: streamID, Reply: msg.Reply(), Seq: md.Sequence.Stream, Delivered: md.NumDelivered}, nil
}

// HandoverKey names the delivery in HandoverBucket.
func (d Delivery) HandoverKey() string {
	return strconv.FormatUint(d.Seq, 10) + "." + strconv.FormatUint(d.Delivered, 10)
}

// handoverRecord is the value of a handover key, for operators.
type handoverRecord struct {
	By       string `json:"by"`
	StreamID string `json:"stream_id"`
	At       int64  `json:"at"`
}

// OpenHandovers returns HandoverBucket, creating it if it is missing
// (Setup does too). Roles that hand deliveries over call it at start.
func OpenHandovers(ctx context.Context, js jetstream.JetStream, t Topology) (jetstream.KeyValue, error) {
	t = t.WithDefaults()
	storage := jetstream.FileStorage
	if t.MemoryStorage {
		storage = jetstream.MemoryStorage
	}
	err := ensureKV(ctx, js, jetstream.KeyValueConfig{
		Bucket:   HandoverBucket,
		History:  1,
		TTL:      handoverRetention,
		Storage:  storage,
		Replicas: t.Replicas,
	})
	if err != nil {
		return nil, fmt.Errorf("protocol: bucket %s: %w", HandoverBucket, err)
	}
	kv, err := js.KeyValue(ctx, HandoverBucket)
	if err != nil {
		return nil, fmt.Errorf("protocol: bucket %s: %w", HandoverBucket, err)
	}
	return kv, nil
}

// ErrHandedOver is returned by HandOver when the delivery was already
// handed over by someone else.
var ErrHandedOver = errors.New("protocol: delivery already handed over")

// HandOver redelivers d at once: it records the handover in kv (the bucket
// from OpenHandovers), and only if no one recorded it before, publishes
// -NAK to the delivery's reply subject. by names the caller in the record.
// Without a record (kv unreachable), nothing is sent and AckWait remains
// the fallback.
func HandOver(ctx context.Context, nc *nats.Conn, kv jetstream.KeyValue, d Delivery, by string) error {
	if d.Reply == "" || d.Seq == 0 {
		return fmt.Errorf("protocol: hand over %q: incomplete delivery", d.StreamID)
	}
	rec, _ := json.Marshal(handoverRecord{By: by, StreamID: d.StreamID, At: time.Now().UnixMilli()})
	if _, err := kv.Create(ctx, d.HandoverKey(), rec); err != nil {
		if errors.Is(err, jetstream.ErrKeyExists) {
			return ErrHandedOver
		}
		return fmt.Errorf("protocol: record handover of %s: %w", d.StreamID, err)
	}
	if err := nc.Publish(d.Reply, []byte("-NAK")); err != nil {
		return fmt.Errorf("protocol: nak %s: %w", d.StreamID, err)
	}
	return nil
}
