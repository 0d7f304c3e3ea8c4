package coordinator_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/coordinator"
	"github.com/relaydev/relay/relay/liveness"
	"github.com/relaydev/relay/relay/provider"
	"github.com/relaydev/relay/relay/relaytest"
	"github.com/relaydev/relay/relay/streams"
	"github.com/relaydev/relay/relay/wire"
)

// msgLog keeps the messages of the records logged through it.
type msgLog struct {
	slog.Handler
	mu   *sync.Mutex
	msgs *[]string
}

func newMsgLog(t *testing.T) msgLog {
	return msgLog{Handler: relaytest.Logger(t).Handler(), mu: &sync.Mutex{}, msgs: &[]string{}}
}

func (l msgLog) Handle(ctx context.Context, r slog.Record) error {
	l.mu.Lock()
	*l.msgs = append(*l.msgs, r.Message)
	l.mu.Unlock()
	return l.Handler.Handle(ctx, r)
}

func (l msgLog) WithAttrs(a []slog.Attr) slog.Handler {
	return msgLog{Handler: l.Handler.WithAttrs(a), mu: l.mu, msgs: l.msgs}
}

func (l msgLog) count(msg string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, m := range *l.msgs {
		if m == msg {
			n++
		}
	}
	return n
}

// TestCoordinatorsHandOverASilentWorkerOnce runs two coordinators and a
// fake worker that holds a request, beats, and falls silent: the request is
// redelivered long before AckWait, after one NAK in all.
func TestCoordinatorsHandOverASilentWorkerOnce(t *testing.T) {
	const (
		ackWait = 30 * time.Second
		timeout = 500 * time.Millisecond
	)
	top := streams.Topology{AckWait: ackWait}
	srv := relaytest.NATS(t)
	nc, js := relaytest.Connect(t, srv, top)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte(`{"data":[]}`)) }))
	defer up.Close()
	catalog, err := provider.NewCatalog([]provider.Config{{Name: "up", BaseURL: up.URL + "/v1", Models: []string{"m"}}})
	if err != nil {
		t.Fatal(err)
	}
	logs := newMsgLog(t)
	var running sync.WaitGroup
	defer running.Wait()
	defer cancel()
	var livenessConns []*nats.Conn
	for range 2 {
		// Each hears heartbeats on a connection of its own.
		liveness, _ := relaytest.Connect(t, srv, top)
		livenessConns = append(livenessConns, liveness)
		c, err := coordinator.New(coordinator.Config{}, coordinator.Deps{JS: js, LivenessNC: liveness, Topology: top, Catalog: catalog, Logger: slog.New(logs)})
		if err != nil {
			t.Fatal(err)
		}
		running.Go(func() {
			if err := c.Run(ctx); err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
	relaytest.Eventually(t, 10*time.Second, 5*time.Millisecond, func() bool { return logs.count("watching worker liveness") == 2 })

	// Every ack and NAK of the worker consumer, by anyone.
	var mu sync.Mutex
	naks := 0
	sub, err := nc.Subscribe("$JS.ACK."+wire.RequestStream+"."+wire.WorkerConsumer+".>", func(m *nats.Msg) {
		if string(m.Data) == "-NAK" {
			mu.Lock()
			naks++
			mu.Unlock()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()

	// The fake worker takes a request and beats with it.
	id := wire.NewStreamID()
	if _, err := js.Publish(ctx, wire.RequestSubject, []byte(`{"stream_id":"`+id+`"}`)); err != nil {
		t.Fatal(err)
	}
	cons, err := js.Consumer(ctx, wire.RequestStream, wire.WorkerConsumer)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	d, err := liveness.DeliveryOf(msg, id)
	if err != nil {
		t.Fatal(err)
	}
	// A full heartbeat, then deltas.
	beats := liveness.NewBeats("fake", "fake-1", timeout)
	for i := range 4 {
		data, _ := json.Marshal(beats.Next([]wire.Delivery{d}, i == 0))
		if err := nc.Publish(wire.LivenessSubject, data); err != nil {
			t.Fatal(err)
		}
		time.Sleep(timeout / 5)
	}
	silent := time.Now()

	again, err := cons.Next(jetstream.FetchMaxWait(ackWait / 2))
	if err != nil {
		t.Fatalf("request not redelivered within half of AckWait: %v", err)
	}
	gap := time.Since(silent)
	t.Logf("redelivered %v after the worker fell silent (liveness timeout %v, AckWait %v)", gap.Round(time.Millisecond), timeout, ackWait)
	md, _ := again.Metadata()
	if md.NumDelivered != 2 || gap > timeout+time.Second {
		t.Fatalf("delivery %d after %v; want the second, within about the liveness timeout", md.NumDelivered, gap)
	}
	// Both coordinators saw the silence at about the same time; give a
	// second NAK, were there one, the time to arrive.
	time.Sleep(500 * time.Millisecond)
	for i, c := range livenessConns {
		if in := c.Stats().InMsgs; in < 4 {
			t.Errorf("coordinator %d's liveness connection received %d messages, want the 4 heartbeats at least", i, in)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if naks != 1 {
		t.Fatalf("%d NAKs sent, want exactly 1", naks)
	}
}
