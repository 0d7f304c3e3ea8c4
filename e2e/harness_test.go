package e2e

import (
	"context"
	"errors"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/relaydev/relay/relay/app"
	"github.com/relaydev/relay/relay/config"
	"github.com/relaydev/relay/relay/mockupstream"
	"github.com/relaydev/relay/relay/natsconn"
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
	// Tune adjusts the configuration every role is started with.
	Tune func(*config.Config)
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
	s := &system{NATS: relaytest.NATS(t)}
	logger := relaytest.Logger(t)
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
			if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
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
	cfg.Edge.Listen = "127.0.0.1:0"
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

// httpClient has no overall timeout: streams are long; tests bound them
// with their request contexts.
var httpClient = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
