package worker

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relaydev/relay/relay/mockupstream"
	"github.com/relaydev/relay/relay/relaytest"
	"github.com/relaydev/relay/relay/wire"
)

// putMeta stores a stream's metadata as an edge does.
func (h *harness) putMeta(id string, m wire.Meta) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	kv, err := h.js.KeyValue(ctx, wire.MetaBucket)
	if err != nil {
		h.t.Fatal(err)
	}
	data, _ := json.Marshal(m)
	if _, err := kv.Put(ctx, id, data); err != nil {
		h.t.Fatal(err)
	}
}

// checkCancelled checks the end frame of a cancelled stream.
func checkCancelled(t *testing.T, end wire.Frame) {
	t.Helper()
	if end.Kind != wire.KindEnd || end.Status != wire.StatusCancelled || end.Error == nil ||
		end.Error.Type != wire.TypeCancelled || end.Error.Status != statusClientClosedRequest {
		t.Fatalf("end = %+v (error %+v), want cancelled", end, end.Error)
	}
}

// A stream its client cancelled while the request was queued ends
// cancelled without a chunk. A redelivery reads the metadata before it
// calls, so it calls no provider; a first delivery calls while it claims
// (runFirst), and that call, which the mock stalls for far longer than the
// test waits, is stopped as soon as the metadata is read.
func TestCancelledBeforePickupEndsWithoutChunks(t *testing.T) {
	cases := []struct {
		name string
		// waited: the request waits in the queue for freshFor before a
		// worker starts; redelivered: it was delivered once before.
		waited, redelivered bool
		// calls is the most upstream calls allowed: only a first delivery
		// picked up at once calls before it reads the stream's metadata.
		calls int
	}{
		{name: "first delivery picked up at once", calls: 1},
		{name: "first delivery after waiting in the queue", waited: true},
		{name: "redelivery", redelivered: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			gate := &recordingGate{}
			h := start(t, setup{mock: mockupstream.Config{TokenInterval: -1}, gate: gate, noWorker: true})
			id := wire.NewStreamID()
			h.putMeta(id, wire.Meta{Model: "mock-1", Created: time.Now().Unix(), Cancelled: true})
			h.submit(id, "[[mock: stall_before=10m]] never mind")
			if tc.redelivered {
				h.redeliver()
			}
			if tc.waited {
				// What is tested is the time spent in the queue.
				time.Sleep(freshFor)
			}
			h.startWorker(Config{}, nil)

			frames := h.waitEnd(id)
			checkCancelled(t, endOf(frames))
			if _, chunks := chunkText(t, frames); len(chunks) != 0 {
				t.Fatalf("%d chunks in a stream cancelled before it started", len(chunks))
			}
			if status := h.waitJob(id); status != "cancelled" {
				t.Fatalf("job status = %q", status)
			}
			if st := h.mock.Stats(); st.ChatRequests > tc.calls {
				t.Fatalf("%d upstream requests for a cancelled stream, want at most %d", st.ChatRequests, tc.calls)
			}
			if v := gate.verdicts(); len(v) > tc.calls || slices.ContainsFunc(v, func(s string) bool { return !strings.HasSuffix(s, ":neutral") }) {
				t.Fatalf("the gate heard %v, want at most %d neutral call", v, tc.calls)
			}
			h.waitAcked()
		})
	}
}

// upstreamClosings records when the fake upstream saw each chat request's
// client go away.
type upstreamClosings struct {
	mu     sync.Mutex
	closed []time.Time
}

func (u *upstreamClosings) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(w, r)
		if r.URL.Path == "/v1/chat/completions" && r.Context().Err() != nil {
			u.mu.Lock()
			u.closed = append(u.closed, time.Now())
			u.mu.Unlock()
		}
	})
}

func (u *upstreamClosings) all() []time.Time {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]time.Time(nil), u.closed...)
}

func TestCancelNoticeStopsTheStreamAtOnce(t *testing.T) {
	const tokens = 500
	gate := &recordingGate{}
	closings := &upstreamClosings{}
	h := start(t, setup{
		mock: mockupstream.Config{Tokens: tokens, TokenInterval: 10 * time.Millisecond},
		gate: gate,
		wrap: closings.wrap,
	})
	id, content := wire.NewStreamID(), "stop me"
	h.putMeta(id, wire.Meta{Model: "mock-1", Created: time.Now().Unix()})
	h.submit(id, content)
	relaytest.Eventually(t, waitFor, 5*time.Millisecond, func() bool {
		_, chunks := chunkText(t, h.frames(id))
		return len(chunks) > 2
	})

	// What an edge does on DELETE: the durable record, then the notice.
	h.putMeta(id, wire.Meta{Model: "mock-1", Created: time.Now().Unix(), Cancelled: true})
	cancelled := time.Now()
	if err := h.nc.Publish(wire.CancelSubject(id), nil); err != nil {
		t.Fatal(err)
	}
	frames := h.waitEnd(id)
	ended := time.Since(cancelled)
	checkCancelled(t, endOf(frames))
	t.Logf("end frame %v after the cancel notice", ended.Round(time.Millisecond))
	if ended > time.Second {
		t.Fatalf("stream ended %v after the cancel notice, want within 1s", ended)
	}
	relaytest.Eventually(t, time.Second, 5*time.Millisecond, func() bool { return len(closings.all()) == 1 })
	if d := closings.all()[0].Sub(cancelled); d > time.Second {
		t.Fatalf("upstream request closed %v after the notice, want within 1s", d)
	}
	text, chunks := chunkText(t, frames)
	if answer := mockupstream.AnswerText(userMessages(content), tokens); !strings.HasPrefix(answer, text) || text == answer {
		t.Fatalf("text %q is not a strict prefix of the answer", text)
	}
	if len(chunks) == 0 {
		t.Fatal("no chunks kept")
	}
	if v := gate.verdicts(); len(v) != 1 || v[0] != "mock/mock-1:neutral" {
		t.Fatalf("gate verdicts = %v, want one neutral: a cancellation is not the provider's failure", v)
	}
	if status := h.waitJob(id); status != "cancelled" {
		t.Fatalf("job status = %q", status)
	}
	if st := h.mock.Stats(); st.ChatRequests != 1 {
		t.Fatalf("%d upstream requests, want 1", st.ChatRequests)
	}
	h.waitAcked()
}
