package natsserver

import (
	"fmt"

	"github.com/nats-io/nats-server/v2/server"
)

// StartFile runs a server configured by a nats-server configuration file
// (accounts, users and their permissions, TLS: see configs/nats/), the way
// a secured production server is configured, and waits until it accepts
// clients. cfg.Listen and cfg.StoreDir, when set, replace the file's
// listen address and JetStream store_dir, so a test can run the shipped
// file on a free port with its own store. The file must enable JetStream.
func StartFile(path string, cfg Config) (*server.Server, error) {
	opts, err := server.ProcessConfigFile(path)
	if err != nil {
		return nil, fmt.Errorf("natsserver: %s: %w", path, err)
	}
	if !opts.JetStream {
		return nil, fmt.Errorf("natsserver: %s: jetstream is not enabled", path)
	}
	if cfg.Listen != "" {
		host, port, err := splitHostPort(cfg.Listen)
		if err != nil {
			return nil, fmt.Errorf("natsserver: listen %q: %w", cfg.Listen, err)
		}
		opts.Host, opts.Port = host, port
	}
	if cfg.StoreDir != "" {
		opts.StoreDir = cfg.StoreDir
	}
	// As in Start, where the file leaves them unset.
	l := &opts.JetStreamLimits
	if l.DefaultMaxConsumers == 0 {
		l.DefaultMaxConsumers = Limits.DefaultMaxConsumers
	}
	if l.MaxBatchInflightPerStream == 0 {
		l.MaxBatchInflightPerStream = Limits.MaxBatchInflightPerStream
	}
	if l.MaxBatchInflightTotal == 0 {
		l.MaxBatchInflightTotal = Limits.MaxBatchInflightTotal
	}
	opts.NoLog, opts.NoSigs = true, true
	return run(opts)
}
