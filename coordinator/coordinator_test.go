package coordinator_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/coordinator"
	"github.com/relaydev/relay/relay/mockupstream"
	"github.com/relaydev/relay/relay/provider"
	"github.com/relaydev/relay/relay/relaytest"
	"github.com/relaydev/relay/relay/streams"
	"github.com/relaydev/relay/relay/wire"
)

func TestHealthIsPublishedPerProvider(t *testing.T) {
	_, js := relaytest.Connect(t, relaytest.NATS(t), streams.Topology{})
	_, up := startMock(t, mockupstream.Config{APIKeys: []string{"k1"}, Models: []string{"m"}})
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	catalog, err := provider.NewCatalog([]provider.Config{
		{Name: "up", BaseURL: up, APIKeys: []string{"k1"}, Models: []string{"m"}},
		{Name: "down", BaseURL: down.URL + "/v1", Models: []string{"m"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	c, err := coordinator.New(coordinator.Config{HealthInterval: 50 * time.Millisecond}, coordinator.Deps{JS: js, Catalog: catalog, Logger: relaytest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- c.Run(ctx) }()
	defer func() { cancel(); <-done }()

	kv, err := js.KeyValue(ctx, wire.HealthBucket)
	if err != nil {
		t.Fatal(err)
	}
	state := func(name string) wire.Health {
		e, err := kv.Get(ctx, name)
		if err != nil {
			return wire.Health{}
		}
		var h wire.Health
		json.Unmarshal(e.Value(), &h)
		return h
	}
	relaytest.Eventually(t, 5*time.Second, 20*time.Millisecond, func() bool {
		return state("up").State == wire.HealthGreen && state("down").State == wire.HealthRed
	})
	if h := state("down"); h.LastError == "" {
		t.Fatalf("red provider without last error: %+v", h)
	}
}

func TestConfigValidateNamesKey(t *testing.T) {
	err := coordinator.Config{HealthInterval: -time.Second}.Validate("coordinator")
	if err == nil || err.Error()[:len("coordinator.health_interval")] != "coordinator.health_interval" {
		t.Fatalf("err = %v", err)
	}
}

// A coordinator stopped while it starts has stopped, not failed: Run
// returns nil, as it does when stopped later (`relay dev` stopped at once
// reported the cancelled start as an error). Without the shared buckets
// it still fails.
func TestRunStoppedWhileStartingIsNotAFailure(t *testing.T) {
	s := relaytest.NATS(t)
	catalog, err := provider.NewCatalog([]provider.Config{{Name: "p", BaseURL: "http://127.0.0.1:1/v1", Models: []string{"m"}}})
	if err != nil {
		t.Fatal(err)
	}
	run := func(js jetstream.JetStream, ctx context.Context) error {
		c, err := coordinator.New(coordinator.Config{}, coordinator.Deps{JS: js, Catalog: catalog, Logger: relaytest.Logger(t)})
		if err != nil {
			t.Fatal(err)
		}
		return c.Run(ctx)
	}
	_, js := relaytest.Connect(t, s, streams.Topology{})
	stopped, cancel := context.WithCancel(t.Context())
	cancel()
	if err := run(js, stopped); err != nil {
		t.Fatalf("Run stopped before it started: %v, want nil", err)
	}

	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	bare, err := jetstream.New(nc, jetstream.WithDefaultTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := bare.DeleteKeyValue(t.Context(), wire.CanaryBucket); err != nil {
		t.Fatal(err)
	}
	if err := run(bare, t.Context()); err == nil {
		t.Fatal("Run without the canary bucket returned nil, want an error")
	}
}
