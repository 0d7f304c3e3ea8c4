package app_test

import (
	"context"
	"testing"
	"time"

	"github.com/relaydev/relay/relay/app"
	"github.com/relaydev/relay/relay/config"
	"github.com/relaydev/relay/relay/relaytest"
)

// startDev runs `relay dev` with the configuration file (none if empty) on
// loopback ports and in-memory streams until the test ends, and returns
// its addresses once it is ready.
func startDev(t *testing.T, file string) app.Addrs {
	t.Helper()
	cfg, err := config.Load(config.Sources{File: file, Set: []string{
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
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	select {
	case a := <-ready:
		return a
	case err := <-done:
		done <- nil // Run returned: nothing left for the cleanup to wait for
		t.Fatalf("Run: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("dev not ready after 30s")
	}
	return app.Addrs{}
}
