package liveness

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/relaydev/relay/relay/wire"
)

// BenchmarkHeartbeatTraffic measures what one worker's heartbeats cost
// each watcher at n requests in flight, with streams of a minute (the
// 10,000-stream benchmark's), the default 500ms interval and a full
// heartbeat every tenth (relay's fullBeatEvery). One op is ten beats (5s)
// encoded by the worker and decoded and applied by one watcher. B/s is
// what crosses the server per watcher; full_B/s is the same for
// heartbeats that list every request every time, the design before
// deltas.
func BenchmarkHeartbeatTraffic(b *testing.B) {
	const (
		interval  = 500 * time.Millisecond
		streamLen = time.Minute
		cycle     = 10
	)
	for _, n := range []int{64, 650, 2600, 4096} {
		b.Run(fmt.Sprintf("inflight=%d", n), func(b *testing.B) {
			beats := NewBeats("bench-worker-1", "0123456789abcdef", time.Second)
			// held is oldest first: the oldest request ends first.
			var held []wire.Delivery
			seq := uint64(1_000_000)
			take := func() {
				seq++
				held = append(held, wire.Delivery{
					StreamID: wire.NewStreamID(),
					Reply: fmt.Sprintf("$JS.ACK.%s.%s.1.%d.%d.%d.%d", wire.RequestStream, wire.WorkerConsumer,
						seq, seq, time.Now().UnixNano(), n),
					Seq: seq, Delivered: 1,
				})
			}
			for range n {
				take()
			}
			// Requests that end, and start, per beat.
			churn := max(1, int(float64(n)*interval.Seconds()/streamLen.Seconds()))
			p := &peer{}
			var bytes, fullBytes int
			b.ResetTimer()
			for range b.N {
				bytes = 0
				for i := range cycle {
					held = held[churn:]
					for range churn {
						take()
					}
					data, _ := json.Marshal(beats.Next(held, i == 0))
					var hb wire.Heartbeat
					if err := json.Unmarshal(data, &hb); err != nil {
						b.Fatal(err)
					}
					if lost := p.apply(hb); lost != "" {
						b.Fatal(lost)
					}
					bytes += len(data)
					if hb.Full {
						fullBytes = len(data)
					}
				}
			}
			b.ReportMetric(float64(bytes)/(cycle*interval.Seconds()), "B/s")
			b.ReportMetric(float64(fullBytes)/interval.Seconds(), "full_B/s")
		})
	}
}
