package coordinator_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/relaydev/relay/coordinator"
	"github.com/relaydev/relay/relay/protocol"
	"github.com/relaydev/relay/relay/provider"
	"github.com/relaydev/relay/relay/relaytest"
)

func TestHealthIsPublishedPerProvider(t *testing.T) {
	_, js := relaytest.Connect(t, relaytest.NATS(t), protocol.Topology{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/models" || r.Header.Get("Authorization") != "Bearer k1" {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		w.Write([]byte(`{"object":"list","data":[]}`))
	}))
	defer up.Close()
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	catalog, err := provider.NewCatalog([]provider.Config{
		{Name: "up", BaseURL: up.URL + "/v1", APIKeys: []string{"k1"}, Models: []string{"m"}},
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

	kv, err := js.KeyValue(ctx, protocol.HealthBucket)
	if err != nil {
		t.Fatal(err)
	}
	state := func(name string) protocol.Health {
		e, err := kv.Get(ctx, name)
		if err != nil {
			return protocol.Health{}
		}
		var h protocol.Health
		json.Unmarshal(e.Value(), &h)
		return h
	}
	relaytest.Eventually(t, 5*time.Second, 20*time.Millisecond, func() bool {
		return state("up").State == protocol.HealthGreen && state("down").State == protocol.HealthRed
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
