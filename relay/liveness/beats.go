package liveness

import (
	"cmp"
	"slices"
	"time"

	"github.com/relaydev/relay/relay/wire"
)

// Beats writes one worker instance's heartbeats: it numbers them and
// makes each either full or the delta from the one before, as the worker
// chooses (see "Worker liveness"). Not safe for concurrent use.
type Beats struct {
	base wire.Heartbeat
	n    uint64
	// last is what the previous heartbeat described; nil before the
	// first.
	last map[wire.DeliveryRef]wire.Delivery
}

// NewBeats starts the heartbeats of a worker instance that declares
// timeout (Heartbeat.TimeoutMS).
func NewBeats(worker, instance string, timeout time.Duration) *Beats {
	return &Beats{base: wire.Heartbeat{Worker: worker, Instance: instance, TimeoutMS: timeout.Milliseconds()}}
}

// Next returns the next heartbeat, given the deliveries the worker holds
// now: full if full is set or it is the first, otherwise what changed
// since the previous one. A heartbeat that could not be sent leaves a gap
// in the numbering; the next should be full, so that watchers get the set
// back soon.
func (b *Beats) Next(held []wire.Delivery, full bool) wire.Heartbeat {
	b.n++
	hb := b.base
	hb.Beat = b.n
	now := make(map[wire.DeliveryRef]wire.Delivery, len(held))
	for _, d := range held {
		now[d.Ref()] = d
	}
	hb.Held = len(now)
	if full || b.last == nil {
		hb.Full = true
		hb.Deliveries = sortedDeliveries(now, nil)
	} else {
		hb.Added = sortedDeliveries(now, b.last)
		for r := range b.last {
			if _, ok := now[r]; !ok {
				hb.Removed = append(hb.Removed, r)
			}
		}
		slices.SortFunc(hb.Removed, compareRefs)
	}
	b.last = now
	return hb
}

// Leaving returns the instance's last heartbeat.
func (b *Beats) Leaving() wire.Heartbeat {
	b.n++
	hb := b.base
	hb.Beat = b.n
	hb.Leaving = true
	return hb
}

// sortedDeliveries lists the deliveries of set missing from except, by
// request sequence (a stable order reads better in a capture).
func sortedDeliveries(set, except map[wire.DeliveryRef]wire.Delivery) []wire.Delivery {
	var out []wire.Delivery
	for r, d := range set {
		if _, ok := except[r]; !ok {
			out = append(out, d)
		}
	}
	slices.SortFunc(out, func(a, b wire.Delivery) int { return compareRefs(a.Ref(), b.Ref()) })
	return out
}

func compareRefs(a, b wire.DeliveryRef) int {
	return cmp.Or(cmp.Compare(a.Seq, b.Seq), cmp.Compare(a.Delivered, b.Delivered))
}
