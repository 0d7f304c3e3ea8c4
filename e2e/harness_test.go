package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/relaydev/relay/relay/app"
	"github.com/relaydev/relay/relay/config"
	"github.com/relaydev/relay/relay/mockupstream"
	"github.com/relaydev/relay/relay/natsconn"
	"github.com/relaydev/relay/relay/natsserver"
	"github.com/relaydev/relay/relay/provider"
	"github.com/relaydev/relay/relay/relaytest"
)

// system is a running relay: embedded NATS, the fake upstream, and edges
// and workers started as the relay binary would start them.
type system struct {
	NATS  *server.Server
	Mock  *mockupstream.Server
	Edges []string // base URLs, "http://127.0.0.1:port"
}

type options struct {
	Edges, Workers int
	Mock           mockupstream.Config
	// Tune adjusts the configuration every role is started with. Edges
	// allow anonymous clients unless it sets edge.allow_anonymous false.
	Tune func(*config.Config)
	// Logs, when set, receives every role's log (debug level) instead of
	// the test log.
	Logs io.Writer
	// NATSPassword, when set, makes NATS require user "relay" with it.
	NATSPassword string
}

// start runs a system for the test and stops it when the test ends.
func start(t *testing.T, o options) *system {
	t.Helper()
	if o.Edges == 0 {
		o.Edges = 1
	}
	if o.Workers == 0 {
		o.Workers = 1
	}
	s := &system{}
	if o.NATSPassword != "" {
		s.NATS = natsWithPassword(t, o.NATSPassword)
	} else {
		s.NATS = relaytest.NATS(t)
	}
	logger := relaytest.Logger(t)
	if o.Logs != nil {
		logger = slog.New(slog.NewTextHandler(o.Logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	ctx, cancel := context.WithCancel(context.Background())

	mock, err := mockupstream.New(o.Mock, logger.With("role", "mock-upstream"))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.Mock = mock
	var running []chan error
	run := func(f func() error) {
		done := make(chan error, 1)
		running = append(running, done)
		go func() { done <- f() }()
	}
	t.Cleanup(func() {
		cancel()
		for _, done := range running {
			// A server whose graceful shutdown ran out of time (a client
			// still streaming) closed its connections: not a failure here.
			if err := <-done; err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("role stopped with: %v", err)
			}
		}
	})
	run(func() error { return mock.Serve(ctx, ln) })

	cfg := config.Config{
		NATS: natsconn.Config{URL: s.NATS.ClientURL()},
		Providers: []provider.Config{{
			Name:    "mock",
			BaseURL: "http://" + ln.Addr().String() + "/v1",
			APIKeys: o.Mock.APIKeys,
			Models:  []string{"mock-1", "mock-2"},
		}},
	}
	if o.NATSPassword != "" {
		cfg.NATS.User, cfg.NATS.Password = "relay", o.NATSPassword
	}
	cfg.Edge.Listen = "127.0.0.1:0"
	cfg.Edge.AllowAnonymous = true
	cfg.Coordinator.Listen = "127.0.0.1:0"
	if o.Tune != nil {
		o.Tune(&cfg)
	}
	startRole := func(role config.Role) app.Addrs {
		t.Helper()
		if err := cfg.Validate(role); err != nil {
			t.Fatal(err)
		}
		ready := make(chan app.Addrs, 1)
		run(func() error {
			return app.Run(ctx, role, cfg, logger.With("instance", string(role)), func(a app.Addrs) { ready <- a })
		})
		select {
		case a := <-ready:
			return a
		case <-time.After(20 * time.Second):
			t.Fatalf("%s not ready", role)
			return app.Addrs{}
		}
	}
	for range o.Workers {
		startRole(config.RoleWorker)
	}
	for range o.Edges {
		a := startRole(config.RoleEdge)
		s.Edges = append(s.Edges, "http://"+a.Edge)
	}
	return s
}

// natsWithPassword starts a server that requires user "relay" with
// password, and shuts it down when the test ends.
func natsWithPassword(t *testing.T, password string) *server.Server {
	t.Helper()
	conf := filepath.Join(t.TempDir(), "nats.conf")
	text := fmt.Sprintf("jetstream {}\nauthorization { user: relay, password: %q }\n", password)
	if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	srv, err := natsserver.StartFile(conf, natsserver.Config{Listen: "127.0.0.1:-1", StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		srv.Shutdown()
		srv.WaitForShutdown()
	})
	return srv
}

// httpClient has no overall timeout: streams are long; tests bound them
// with their request contexts.
var httpClient = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
