// Package natsserver runs an embedded nats-server with JetStream. It is the
// default single-machine mode of `relay dev` and the server every test
// starts; production runs a real NATS cluster instead.
package natsserver

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Config of the embedded server. The zero value listens on a free
// loopback port and stores under ./data.
type Config struct {
	// Listen is host:port for clients; port 0 or -1 picks a free one
	// (zero: "127.0.0.1:-1").
	Listen string `koanf:"listen"`
	// StoreDir holds JetStream's files (zero: "./data").
	StoreDir string `koanf:"store_dir"`
	// Domain is the JetStream domain of the server's region (zero: none,
	// a single region). Required with Leaf; see region.go.
	Domain string `koanf:"domain"`
	// Leaf joins the server to other regions (zero: it joins none).
	Leaf LeafConfig `koanf:"leaf"`
	// User and Password are the only credentials the server accepts from
	// clients (auth.go). Zero: none are asked for, unless the caller adds
	// random ones (WithRandomCredentials), as `relay dev` does. Required
	// to listen beyond loopback.
	User     string `koanf:"user"`
	Password string `koanf:"password"`
	// EncryptionKey, when set, encrypts JetStream's files at rest
	// (encryption.go). Zero: they are stored in cleartext.
	EncryptionKey string `koanf:"encryption_key"`
}

// Validate names the first invalid field under prefix.
func (c Config) Validate(prefix string) error {
	if c.Listen != "" {
		if _, _, err := splitHostPort(c.Listen); err != nil {
			return fmt.Errorf("%s.listen: %v", prefix, err)
		}
	}
	if err := c.validateAuth(prefix); err != nil { // auth.go
		return err
	}
	if err := c.validateEncryption(prefix); err != nil {
		return err
	}
	return c.validateRegion(prefix)
}

func splitHostPort(listen string) (string, int, error) {
	host, portText, err := net.SplitHostPort(listen)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(portText)
	if err != nil || port < -1 || port > 65535 {
		return "", 0, fmt.Errorf("bad port %q", portText)
	}
	if port == 0 {
		port = server.RANDOM_PORT
	}
	return host, port, nil
}

// Limits are the JetStream limits a relay's servers need beyond the
// defaults; the shipped configuration files set the same.
var Limits = server.JSLimitOpts{
	// Every KV watcher is a consumer; the default cap of 1,000 per stream
	// would refuse the 1,001st watcher of a large fleet.
	DefaultMaxConsumers: -1,
	// Each worker keeps one atomic batch of appends in flight on a
	// replicated chunk stream (chunklog.Committer); the defaults (50 a
	// stream, 1,000 a server) would send the appends of a fleet's 51st
	// worker alone.
	MaxBatchInflightPerStream: 1000,
	MaxBatchInflightTotal:     10000,
}

// Start runs the server and waits until it accepts clients.
func Start(cfg Config) (*server.Server, error) {
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:-1"
	}
	host, port, err := splitHostPort(cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("natsserver: listen %q: %w", cfg.Listen, err)
	}
	if cfg.StoreDir == "" {
		cfg.StoreDir = "data"
	}
	opts := &server.Options{
		ServerName:      "relay-embedded",
		Host:            host,
		Port:            port,
		NoLog:           true,
		NoSigs:          true,
		JetStream:       true,
		StoreDir:        cfg.StoreDir,
		JetStreamLimits: Limits,
	}
	opts.Username, opts.Password = cfg.User, cfg.Password
	applyEncryption(opts, cfg)
	if err := applyRegion(opts, cfg); err != nil {
		return nil, err
	}
	return run(opts)
}

// run starts a server with opts and waits until it accepts clients.
func run(opts *server.Options) (*server.Server, error) {
	s, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("natsserver: %w", err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		return nil, errors.New("natsserver: not ready after 10s")
	}
	return s, nil
}
