package edge_test

import (
	"context"
	"log/slog"
	"net"
	"os"
	"os/signal"

	"github.com/relaydev/relay/edge"
	"github.com/relaydev/relay/relay/natsconn"
	"github.com/relaydev/relay/relay/provider"
	"github.com/relaydev/relay/relay/streams"
)

// A main wires an edge like this: connect, set up the assets, hand the
// server its listener, and cancel the context to shut it down.
func ExampleServer_Serve() {
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	nc, js, err := natsconn.Connect(natsconn.Config{}, "relay-edge", logger)
	if err != nil {
		logger.Error("connect", "err", err)
		return
	}
	defer nc.Drain()
	if err := streams.Setup(ctx, js, streams.Topology{}); err != nil {
		logger.Error("setup", "err", err)
		return
	}
	catalog, err := provider.NewCatalog([]provider.Config{
		{Name: "openai", BaseURL: "https://api.openai.com/v1", Models: []string{"gpt-4o-mini"}},
	})
	if err != nil {
		logger.Error("catalog", "err", err)
		return
	}
	cfg := edge.Config{}.WithDefaults()
	srv, err := edge.New(cfg, edge.Deps{NC: nc, JS: js, Catalog: catalog, Logger: logger})
	if err != nil {
		logger.Error("edge", "err", err)
		return
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		logger.Error("listen", "err", err)
		return
	}
	if err := srv.Serve(ctx, ln); err != nil {
		logger.Error("serve", "err", err)
	}
}
