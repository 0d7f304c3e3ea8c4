package liveness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/relay/wire"
)

// livenessEchoPrefix starts the subject on which a watcher sends itself an
// echo; a relay subject rather than an inbox, so that no role needs a grant
// to publish to inboxes (configs/nats).
const livenessEchoPrefix = "relay.liveness.echo."

// DeliveryOf describes msg, a request delivered by the worker consumer.
func DeliveryOf(msg jetstream.Msg, streamID string) (wire.Delivery, error) {
	md, err := msg.Metadata()
	if err != nil {
		return wire.Delivery{}, fmt.Errorf("liveness: delivery metadata: %w", err)
	}
	return wire.Delivery{StreamID: streamID, Reply: msg.Reply(), Seq: md.Sequence.Stream, Delivered: md.NumDelivered}, nil
}

// handoverRecord is the value of a handover key, for operators.
type handoverRecord struct {
	By       string `json:"by"`
	StreamID string `json:"stream_id"`
	At       int64  `json:"at"`
}

// ErrHandedOver is returned by HandOver when the delivery was already
// handed over by someone else.
var ErrHandedOver = errors.New("liveness: delivery already handed over")

// HandOver redelivers d at once: it records the handover in kv (the bucket
// from OpenHandovers), and only if no one recorded it before, publishes
// -NAK to the delivery's reply subject. by names the caller in the record.
// Without a record (kv unreachable), nothing is sent and AckWait remains
// the fallback.
func HandOver(ctx context.Context, nc *nats.Conn, kv jetstream.KeyValue, d wire.Delivery, by string) error {
	if d.Reply == "" || d.Seq == 0 {
		return fmt.Errorf("liveness: hand over %q: incomplete delivery", d.StreamID)
	}
	rec, _ := json.Marshal(handoverRecord{By: by, StreamID: d.StreamID, At: time.Now().UnixMilli()})
	if _, err := kv.Create(ctx, d.HandoverKey(), rec); err != nil {
		if errors.Is(err, jetstream.ErrKeyExists) {
			return ErrHandedOver
		}
		return fmt.Errorf("liveness: record handover of %s: %w", d.StreamID, err)
	}
	if err := nc.Publish(d.Reply, []byte("-NAK")); err != nil {
		return fmt.Errorf("liveness: nak %s: %w", d.StreamID, err)
	}
	return nil
}
