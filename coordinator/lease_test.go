package coordinator_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/relaydev/relay/coordinator"
	"github.com/relaydev/relay/relay/fleet/breaker"
	"github.com/relaydev/relay/relay/mockupstream"
	"github.com/relaydev/relay/relay/provider"
	"github.com/relaydev/relay/relay/relaytest"
	"github.com/relaydev/relay/relay/streams"
	"github.com/relaydev/relay/relay/wire"
)

// running is a coordinator under test.
type running struct {
	c      *coordinator.Coordinator
	cancel context.CancelFunc
	done   chan struct{}
	err    error

	mu          sync.Mutex
	transitions []string // the breaker transitions it made, "from->to"
}

func (r *running) OnEvent(ev breaker.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.transitions = append(r.transitions, string(ev.From)+"->"+string(ev.To))
}

func (r *running) made() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.transitions)
}

func (r *running) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	<-r.done
	if r.err != nil {
		t.Fatal(r.err)
	}
}

func startCoordinator(t *testing.T, srv *server.Server, cfg coordinator.Config, catalog *provider.Catalog, name string) *running {
	t.Helper()
	_, js := relaytest.Connect(t, srv, streams.Topology{})
	r := &running{done: make(chan struct{})}
	c, err := coordinator.New(cfg, coordinator.Deps{JS: js, Catalog: catalog, Logger: relaytest.Logger(t).With("coordinator", name), Name: name, Breakers: r})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.c, r.cancel = c, cancel
	go func() {
		defer close(r.done)
		r.err = c.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-r.done
	})
	return r
}

// startMock starts the fake provider and returns it with its API root.
func startMock(t *testing.T, cfg mockupstream.Config) (*mockupstream.Server, string) {
	t.Helper()
	cfg.TokenInterval = -1
	m, err := mockupstream.New(cfg, relaytest.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	up := httptest.NewServer(m.Handler())
	t.Cleanup(up.Close)
	return m, up.URL + "/v1"
}

func upstreamOK(t *testing.T) *provider.Catalog {
	t.Helper()
	_, url := startMock(t, mockupstream.Config{Models: []string{"m"}})
	catalog, err := provider.NewCatalog([]provider.Config{{Name: "p", BaseURL: url, Models: []string{"m"},
		Breaker: breaker.Config{Cooldown: time.Second}}})
	if err != nil {
		t.Fatal(err)
	}
	return catalog
}

// Of two coordinators one is active; when it stops, the other takes over
// at once (the lease is released, not left to expire).
func TestOneActiveCoordinator(t *testing.T) {
	srv := relaytest.NATS(t)
	catalog := upstreamOK(t)
	cfg := coordinator.Config{LeaseTTL: 2 * time.Second, HealthInterval: time.Second}
	a := startCoordinator(t, srv, cfg, catalog, "a")
	relaytest.Eventually(t, 5*time.Second, 10*time.Millisecond, a.c.Active)
	b := startCoordinator(t, srv, cfg, catalog, "b")
	time.Sleep(3 * time.Second)
	if !a.c.Active() || b.c.Active() {
		t.Fatalf("a active %v, b active %v", a.c.Active(), b.c.Active())
	}
	stopped := time.Now()
	a.stop(t)
	relaytest.Eventually(t, 2*time.Second, 10*time.Millisecond, b.c.Active)
	t.Logf("b active %v after a stopped", time.Since(stopped).Round(time.Millisecond))
}

// A breaker whose cooldown ended without any worker to probe it is probed
// by the active coordinator (a one-token chat completion), which closes it; while it is
// open, the provider's health is red.
func TestCoordinatorProbesIdleBreaker(t *testing.T) {
	srv := relaytest.NATS(t)
	_, js := relaytest.Connect(t, srv, streams.Topology{})
	catalog := upstreamOK(t)
	ctx := context.Background()
	breakers, _ := js.KeyValue(ctx, wire.BreakerBucket)
	health, _ := js.KeyValue(ctx, wire.HealthBucket)
	open := breaker.State{Phase: breaker.Open, Since: time.Now(), Trips: 1, Until: time.Now().Add(1500 * time.Millisecond), By: "w1"}
	data, _ := json.Marshal(open)
	if _, err := breakers.Put(ctx, "p", data); err != nil {
		t.Fatal(err)
	}
	c := startCoordinator(t, srv, coordinator.Config{HealthInterval: 100 * time.Millisecond, ProbeGrace: 200 * time.Millisecond}, catalog, "c")
	state := func() (breaker.State, wire.Health) {
		var b breaker.State
		var h wire.Health
		if e, err := breakers.Get(ctx, "p"); err == nil {
			json.Unmarshal(e.Value(), &b)
		}
		if e, err := health.Get(ctx, "p"); err == nil {
			json.Unmarshal(e.Value(), &h)
		}
		return b, h
	}
	relaytest.Eventually(t, 3*time.Second, 20*time.Millisecond, func() bool {
		_, h := state()
		return h.State == wire.HealthRed && h.Breaker == string(breaker.Open)
	})
	relaytest.Eventually(t, 5*time.Second, 20*time.Millisecond, func() bool {
		b, h := state()
		return b.Current() == breaker.Closed && h.State == wire.HealthGreen
	})
	b, _ := state()
	if b.By != "c" {
		t.Fatalf("closed by %q, want the coordinator", b.By)
	}
	if took := b.Since.Sub(open.Until); took < 200*time.Millisecond {
		t.Fatalf("probed %v after the cooldown, before the grace", took)
	}
	if got := c.made(); !slices.Equal(got, []string{"open->half_open", "half_open->closed"}) {
		t.Fatalf("the coordinator counted the transitions %v", got)
	}
}
