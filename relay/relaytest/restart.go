package relaytest

import (
	"net"
	"sync"
	"testing"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/relaydev/relay/relay/natsserver"
)

// Restartable is an embedded server a test can stop and start again on
// the same port with the same store, as a supervisor restarts a
// nats-server process: clients reconnect to the URL they had, and
// JetStream recovers its streams from the files.
type Restartable struct {
	t   testing.TB
	cfg natsserver.Config

	mu  sync.Mutex
	srv *server.Server // nil while stopped
}

// RestartableNATS starts a server with file storage under t.TempDir() and
// shuts it down when the test ends.
func RestartableNATS(t testing.TB) *Restartable {
	t.Helper()
	r := &Restartable{t: t, cfg: natsserver.Config{StoreDir: t.TempDir()}}
	r.Start()
	_, port, err := net.SplitHostPort(r.Server().Addr().String())
	if err != nil {
		t.Fatalf("nats address: %v", err)
	}
	r.cfg.Listen = net.JoinHostPort("127.0.0.1", port)
	t.Cleanup(r.Stop)
	return r
}

// Server is the running server; nil while stopped.
func (r *Restartable) Server() *server.Server {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.srv
}

// Stop shuts the server down and waits until it is gone. It does nothing
// while stopped.
func (r *Restartable) Stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.srv == nil {
		return
	}
	r.srv.Shutdown()
	r.srv.WaitForShutdown()
	r.srv = nil
}

// Start starts the server again; it does nothing while running.
func (r *Restartable) Start() {
	r.t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.srv != nil {
		return
	}
	s, err := natsserver.Start(r.cfg)
	if err != nil {
		r.t.Fatalf("start nats: %v", err)
	}
	r.srv = s
}
