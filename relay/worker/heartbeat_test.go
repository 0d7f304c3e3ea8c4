package worker

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/relaydev/relay/relay/liveness"
	"github.com/relaydev/relay/relay/wire"
)

// sentBeat is a heartbeat as sent, with the bubble's time.
type sentBeat struct {
	at time.Duration
	hb wire.Heartbeat
}

// beatRig runs a heartbeat in a synctest bubble and records what it sends.
type beatRig struct {
	jobs  *inflight
	start time.Time
	stop  chan struct{}
	done  chan struct{}
	mu    sync.Mutex
	sent  []sentBeat
	// fail makes send fail for the beats with these numbers.
	fail map[uint64]bool
	// resync asks for a full beat.
	resync chan struct{}
}

// newBeatRig starts beating every interval with jobs in flight; send
// fails for the beats numbered in fail.
func newBeatRig(every time.Duration, fail map[uint64]bool, jobs ...*job) *beatRig {
	r := &beatRig{jobs: newInflight(newProgress(time.Hour, slog.Default()).keep), start: time.Now(), stop: make(chan struct{}), done: make(chan struct{}), fail: fail, resync: make(chan struct{})}
	for _, j := range jobs {
		r.jobs.add(j)
	}
	h := heartbeat{
		every:  every,
		beats:  liveness.NewBeats("w", "i", 1500*time.Millisecond),
		jobs:   r.jobs,
		resync: r.resync,
		send: func(hb wire.Heartbeat) error {
			r.mu.Lock()
			defer r.mu.Unlock()
			if r.fail[hb.Beat] {
				return errors.New("not sent")
			}
			r.sent = append(r.sent, sentBeat{time.Since(r.start), hb})
			return nil
		},
	}
	go func() {
		defer close(r.done)
		h.run(r.stop)
	}()
	return r
}

// finish stops the heartbeat and returns what it sent.
func (r *beatRig) finish() []sentBeat {
	close(r.stop)
	<-r.done
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.sent)
}

func TestHeartbeatRhythm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const every = 500 * time.Millisecond
		r := newBeatRig(every, nil)
		// Two ticks with nothing in flight, then a job arrives 50ms after
		// the second: it is listed one minimum gap (every/5) after that
		// beat, not a whole interval later.
		time.Sleep(every + 50*time.Millisecond)
		d := wire.Delivery{StreamID: "s1", Reply: "r1", Seq: 7, Delivered: 1}
		j := &job{req: wire.Request{StreamID: "s1"}, delivery: d}
		r.jobs.add(j)
		time.Sleep(2 * every)
		r.jobs.remove(j)
		time.Sleep(every)
		sent := r.finish()

		var got []time.Duration
		for _, b := range sent {
			got = append(got, b.at)
		}
		want := []time.Duration{0, every, every + every/5, 2 * every, 3 * every, 4 * every, 4*every + 50*time.Millisecond}
		if !slices.Equal(got, want) {
			t.Fatalf("beats at %v, want %v", got, want)
		}
		for i, b := range sent {
			if b.hb.Beat != uint64(i+1) || b.hb.Instance != "i" || b.hb.TimeoutMS != 1500 {
				t.Errorf("beat %d = %+v; want number %d of instance i, timeout 1500ms", i, b.hb, i+1)
			}
			wantHeld := 0
			if i >= 2 && i <= 4 {
				wantHeld = 1
			}
			if b.hb.Held != wantHeld {
				t.Errorf("beat %d holds %d, want %d", i, b.hb.Held, wantHeld)
			}
		}
		// The first beat is full and empty; then only changes travel: the
		// job once when it is added, once when it is removed.
		if first := sent[0].hb; !first.Full || len(first.Deliveries) != 0 {
			t.Errorf("first beat %+v, want full and empty", first)
		}
		if b := sent[2].hb; b.Full || len(b.Added) != 1 || b.Added[0] != d || len(b.Removed) != 0 {
			t.Errorf("beat after the job started = %+v, want a delta adding it", b)
		}
		for _, i := range []int{1, 3, 4} {
			if b := sent[i].hb; b.Full || len(b.Added)+len(b.Removed)+len(b.Deliveries) != 0 {
				t.Errorf("beat %d = %+v, want an empty delta", i, b)
			}
		}
		if b := sent[5].hb; b.Full || len(b.Removed) != 1 || b.Removed[0] != d.Ref() || b.Held != 0 {
			t.Errorf("beat after the job ended = %+v, want a delta removing it", b)
		}
		if last := sent[len(sent)-1].hb; !last.Leaving {
			t.Errorf("last beat %+v is not leaving", last)
		}
	})
}

func TestHeartbeatIsFullEveryTenthIntervalAndAfterAFailedSend(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const every = 100 * time.Millisecond
		// Beat 14 is not sent: 15 must be full again.
		r := newBeatRig(every, map[uint64]bool{14: true}, &job{delivery: wire.Delivery{StreamID: "s1", Reply: "r1", Seq: 1, Delivered: 1}})
		time.Sleep(2*fullBeatEvery*every + every/2)
		sent := r.finish()

		var full []uint64
		for _, b := range sent {
			if b.hb.Full {
				full = append(full, b.hb.Beat)
				if len(b.hb.Deliveries) != 1 || b.hb.Held != 1 {
					t.Errorf("full beat %+v, want the job listed", b.hb)
				}
			}
		}
		// Beat 1 at start, beat 2 early (the job was added before), then
		// one per interval: interval k is beat k+2.
		if want := []uint64{1, fullBeatEvery + 2, 15, 2*fullBeatEvery + 2}; !slices.Equal(full, want) {
			t.Fatalf("full beats %v, want %v", full, want)
		}
	})
}

func TestHeartbeatAnswersResyncsSoonButOnceAnInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const every = 100 * time.Millisecond
		r := newBeatRig(every, nil)
		// Asked half an interval after the first beat (full), the worker
		// answers an interval after that beat; asked 150ms after the
		// answer, at once; asked three times 10ms later, once, an
		// interval after the last full beat, whatever beats come between.
		for _, at := range []time.Duration{50, 250, 260, 260, 260} {
			time.Sleep(at*time.Millisecond - time.Since(r.start))
			r.resync <- struct{}{}
		}
		time.Sleep(450*time.Millisecond - time.Since(r.start))
		var full []time.Duration
		for _, b := range r.finish() {
			if b.hb.Full {
				full = append(full, b.at)
			}
		}
		if want := []time.Duration{0, every, 250 * time.Millisecond, 350 * time.Millisecond}; !slices.Equal(full, want) {
			t.Fatalf("full beats at %v, want %v", full, want)
		}
	})
}

// TestHeartbeatResyncDoesNotDelayANewJob: a job taken while a resync
// waits for its interval is listed a minimum gap after the last beat, as
// ever, not when the full beat is due.
func TestHeartbeatResyncDoesNotDelayANewJob(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const every = 100 * time.Millisecond
		r := newBeatRig(every, nil)
		time.Sleep(5 * time.Millisecond)
		r.resync <- struct{}{}
		time.Sleep(5 * time.Millisecond)
		r.jobs.add(&job{delivery: wire.Delivery{StreamID: "s1", Reply: "r1", Seq: 1, Delivered: 1}})
		time.Sleep(every + every/2)
		sent := r.finish()
		if b := sent[1]; b.at != every/5 || b.hb.Full || len(b.hb.Added) != 1 {
			t.Fatalf("second beat %+v, want a delta listing the job at %v", b, every/5)
		}
		if b := sent[2]; b.at != every || !b.hb.Full {
			t.Fatalf("third beat %+v, want the full one at %v", b, every)
		}
	})
}

// TestFullHeartbeatAtMaxInflightFitsMaxPayload: a full heartbeat lists
// every request, so max_inflight's cap must keep it under NATS's default
// max_payload (1 MiB), with room to spare, at the longest worker id and
// with numbers far beyond what a queue reaches: a trillion requests
// (stream and consumer sequences of 13 digits), 9,999 deliveries of each,
// ten million pending.
func TestFullHeartbeatAtMaxInflightFitsMaxPayload(t *testing.T) {
	const (
		maxPayload = 1 << 20
		seq        = 1_000_000_000_000
		delivered  = 9_999
		pending    = 9_999_999
	)
	held := make([]wire.Delivery, maxMaxInflight)
	for i := range held {
		s := uint64(seq + i)
		held[i] = wire.Delivery{
			StreamID: wire.NewStreamID(),
			// $JS.ACK.<stream>.<consumer>.<delivered>.<stream seq>.<consumer seq>.<ts>.<pending>
			Reply:     fmt.Sprintf("$JS.ACK.%s.%s.%d.%d.%d.%d.%d", wire.RequestStream, wire.WorkerConsumer, delivered, s, s, time.Now().UnixNano(), pending),
			Seq:       s,
			Delivered: delivered,
		}
	}
	beats := liveness.NewBeats(strings.Repeat("w", maxIDLen), newInstance(), DefaultLivenessTimeout)
	data, err := json.Marshal(beats.Next(held, true))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("full heartbeat with %d requests: %d bytes (%.0f%% of max_payload)", maxMaxInflight, len(data), 100*float64(len(data))/maxPayload)
	if len(data) > maxPayload*3/4 {
		t.Fatalf("full heartbeat of %d bytes at max_inflight %d; want at most 3/4 of max_payload (%d)", len(data), maxMaxInflight, maxPayload)
	}
}
