package edge

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/relaydev/relay/relay/liveness"
	"github.com/relaydev/relay/relay/relaytest"
	"github.com/relaydev/relay/relay/streams"
	"github.com/relaydev/relay/relay/wire"
)

// A delta heartbeat lists only what changed; the board shows what the
// worker holds, which every beat counts.
func TestWorkerBoardCountsHeldStreams(t *testing.T) {
	srv := relaytest.NATS(t)
	nc, _ := relaytest.Connect(t, srv, streams.Topology{MemoryStorage: true})
	board := newWorkerBoard(nc, relaytest.Logger(t))
	if _, err := board.list(); err != nil {
		t.Fatal(err)
	}
	pub, _ := relaytest.Connect(t, srv, streams.Topology{MemoryStorage: true})
	beats := liveness.NewBeats("w1", "instance-1", 1500*time.Millisecond)
	held := []wire.Delivery{{StreamID: "a", Reply: "r.1", Seq: 1, Delivered: 1}, {StreamID: "b", Reply: "r.2", Seq: 2, Delivered: 1}}
	send := func(hb wire.Heartbeat) {
		data, err := json.Marshal(hb)
		if err != nil {
			t.Fatal(err)
		}
		if err := pub.Publish(wire.LivenessSubject, data); err != nil {
			t.Fatal(err)
		}
	}
	streams := func() int {
		views, err := board.list()
		if err != nil || len(views) != 1 {
			return -1
		}
		return views[0].Streams
	}
	send(beats.Next(held, false)) // the first beat is full
	relaytest.Eventually(t, 5*time.Second, 10*time.Millisecond, func() bool { return streams() == 2 })
	held = append(held, wire.Delivery{StreamID: "c", Reply: "r.3", Seq: 3, Delivered: 1})
	delta := beats.Next(held, false)
	if delta.Full || len(delta.Added) != 1 {
		t.Fatalf("second beat: %+v, want a delta adding one delivery", delta)
	}
	send(delta)
	relaytest.Eventually(t, 5*time.Second, 10*time.Millisecond, func() bool { return streams() == 3 })
}
