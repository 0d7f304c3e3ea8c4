package relay

import (
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/relaydev/relay/relay/protocol"
)

// sentBeat is a heartbeat as sent, with the bubble's time.
type sentBeat struct {
	at time.Duration
	hb protocol.Heartbeat
}

func TestHeartbeatRhythm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const every = 500 * time.Millisecond
		start := time.Now()
		jobs := newInflight()
		var mu sync.Mutex
		var sent []sentBeat
		h := heartbeat{
			every: every,
			base:  protocol.Heartbeat{Worker: "w", Instance: "i", TimeoutMS: 1500},
			jobs:  jobs,
			send: func(hb protocol.Heartbeat) {
				mu.Lock()
				defer mu.Unlock()
				sent = append(sent, sentBeat{time.Since(start), hb})
			},
		}
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			h.run(stop)
		}()

		// Two ticks with nothing in flight, then a job arrives 50ms after
		// the second: it is listed one minimum gap (every/5) after that
		// beat, not a whole interval later.
		time.Sleep(every + 50*time.Millisecond)
		j := &job{req: protocol.Request{StreamID: "s1"}, delivery: protocol.Delivery{StreamID: "s1", Reply: "r1", Seq: 7, Delivered: 1}}
		jobs.add(j)
		time.Sleep(2 * every)
		jobs.remove(j)
		time.Sleep(every)
		close(stop)
		<-done

		mu.Lock()
		defer mu.Unlock()
		var got []time.Duration
		for _, b := range sent {
			got = append(got, b.at)
		}
		want := []time.Duration{0, every, every + every/5, 2 * every, 3 * every, 4 * every, 4*every + 50*time.Millisecond}
		if len(got) != len(want) {
			t.Fatalf("beats at %v, want %v", got, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("beats at %v, want %v", got, want)
			}
		}
		for i, b := range sent {
			listed := len(b.hb.Deliveries) == 1 && b.hb.Deliveries[0].Reply == "r1"
			if wantListed := i >= 2 && i <= 4; listed != wantListed || b.hb.Instance != "i" || b.hb.TimeoutMS != 1500 {
				t.Errorf("beat %d at %v = %+v; want the job listed: %v", i, b.at, b.hb, wantListed)
			}
		}
		if last := sent[len(sent)-1].hb; !last.Leaving {
			t.Errorf("last beat %+v is not leaving", last)
		}
	})
}
