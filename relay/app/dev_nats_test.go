package app_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/relaydev/relay/relay/app"
	"github.com/relaydev/relay/relay/config"
	"github.com/relaydev/relay/relay/relaytest"
)

// `relay dev`'s embedded NATS refuses a local process without the random
// credentials of this run, while the roles in the process, which have
// them, serve.
func TestDevNATSRefusesUnauthenticated(t *testing.T) {
	cfg, err := config.Load(config.Sources{Set: []string{
		"embedded_nats.store_dir=" + t.TempDir(), "streams.memory_storage=true",
		"edge.listen=127.0.0.1:0", "worker.listen=127.0.0.1:0", "coordinator.listen=127.0.0.1:0",
	}}, config.RoleDev)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan app.Addrs, 1)
	done := make(chan error, 1)
	go func() {
		done <- app.Run(ctx, config.RoleDev, cfg, relaytest.Logger(t), func(a app.Addrs) { ready <- a })
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	var addrs app.Addrs
	select {
	case addrs = <-ready:
	case err := <-done:
		t.Fatalf("Run: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("dev not ready after 30s")
	}

	nc, err := nats.Connect(addrs.NATS, nats.NoReconnect())
	if err == nil {
		nc.Close()
		t.Fatal("an unauthenticated client connected to dev's NATS")
	}
	// The server's -ERR text, which nats.go does not map to its sentinel.
	if !strings.EqualFold(err.Error(), nats.ErrAuthorization.Error()) {
		t.Errorf("unauthenticated: %v; want %v", err, nats.ErrAuthorization)
	}
	client := &http.Client{Transport: &http.Transport{}, Timeout: 5 * time.Second}
	defer client.CloseIdleConnections()
	if status, _, body := fetch(client, "http://"+addrs.Edge+"/readyz"); status != http.StatusOK {
		t.Errorf("the edge of dev: /readyz %d %s; want the roles connected with the credentials", status, body)
	}
}
