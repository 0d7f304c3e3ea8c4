// Package config loads the relay's configuration in layers: the built-in
// defaults (every zero value means the role's default), then a YAML file,
// then RELAY_ environment variables, then --set flags. Unknown keys and
// invalid values stop the process at start with a message naming the key.
//
// Environment variables name a key with "__" between levels:
// RELAY_EDGE__LISTEN=0.0.0.0:8080 sets edge.listen, and
// RELAY_WORKER__MAX_INFLIGHT=128 sets worker.max_inflight.
package config

import (
	"fmt"
	"log/slog"

	"github.com/relaydev/relay/coordinator"
	"github.com/relaydev/relay/edge"
	"github.com/relaydev/relay/relay/mockupstream"
	"github.com/relaydev/relay/relay/natsconn"
	"github.com/relaydev/relay/relay/natsserver"
	"github.com/relaydev/relay/relay/provider"
	"github.com/relaydev/relay/relay/region"
	"github.com/relaydev/relay/relay/streams"
	"github.com/relaydev/relay/relay/tracing"
	"github.com/relaydev/relay/relay/worker"
)

// Config is the whole file. Each role reads the sections it needs; Validate
// checks those for the role being started.
type Config struct {
	Log LogConfig `koanf:"log"`
	// Tracing exports OpenTelemetry spans over OTLP/HTTP
	// (relay/README.md "Tracing"); zero: off.
	Tracing tracing.Config `koanf:"tracing"`
	// PprofListen is host:port of the profiling listener every role can
	// serve (net/http/pprof, relay/app/pprof.go); zero: none. It is its
	// own listener, apart from the edge's and the ops listeners, so that
	// profiles are only ever served where they were asked for.
	PprofListen string `koanf:"pprof_listen"`
	// NATS is where every role but dev connects.
	NATS natsconn.Config `koanf:"nats"`
	// SetupNATS is the setup identity, the one allowed to create and update
	// the JetStream assets (configs/nats). `relay setup` connects with it
	// when it names credentials (else with nats); a coordinator that has
	// them sets up at start on a connection of its own, closed before it
	// runs on nats. Its url, when zero, is nats.url.
	SetupNATS natsconn.Config `koanf:"setup_nats"`
	// EmbeddedNATS is the server `relay dev` runs in-process.
	EmbeddedNATS natsserver.Config `koanf:"embedded_nats"`
	// Streams sizes the JetStream streams and buckets.
	Streams     streams.Topology   `koanf:"streams"`
	Edge        edge.Config        `koanf:"edge"`
	Worker      worker.Config      `koanf:"worker"`
	Coordinator coordinator.Config `koanf:"coordinator"`
	// Region places the process in one of several regions that share
	// breaker and quota state (configs/README.md "Regions"); zero: a single region.
	Region region.Region `koanf:"region"`
	// Providers are the upstream OpenAI-compatible APIs. `relay dev` adds
	// the built-in fake upstream as provider "mock" when the list is empty.
	Providers []provider.Config `koanf:"providers"`
	// Models holds per-model settings (fallback chains, retries per model,
	// continuation mode, price) of models the providers serve; optional.
	Models       []provider.Model `koanf:"models"`
	MockUpstream MockUpstream     `koanf:"mock_upstream"`

	// ignoredEnv: IgnoredEnv (env.go).
	ignoredEnv []string
}

// LogConfig selects the log format and level.
type LogConfig struct {
	// Level is debug, info (the default), warn or error.
	Level string `koanf:"level"`
	// Format is text (the default) or json.
	Format string `koanf:"format"`
}

// MockUpstream is the fake provider's listener and behaviour.
type MockUpstream struct {
	// Listen is host:port (zero: 127.0.0.1:8081 for `relay mock-upstream`,
	// a free loopback port for `relay dev`).
	Listen              string `koanf:"listen"`
	mockupstream.Config `koanf:",squash"`
}

// Role names a subcommand that runs from this configuration.
type Role string

const (
	RoleDev          Role = "dev"
	RoleEdge         Role = "edge"
	RoleWorker       Role = "worker"
	RoleCoordinator  Role = "coordinator"
	RoleMockUpstream Role = "mock-upstream"
	// RoleSetup creates or updates the JetStream assets, then exits.
	RoleSetup Role = "setup"
)

// SetupConn is the connection config of the setup step: SetupNATS when it
// names credentials, with nats's url unless its own is set; else NATS.
func (c Config) SetupConn() natsconn.Config {
	s := c.SetupNATS
	if !s.HasCredentials() {
		return c.NATS
	}
	if s.URL == "" {
		s.URL = c.NATS.URL
	}
	return s
}

// Validate checks the sections role uses, naming the first bad key.
func (c Config) Validate(role Role) error {
	if err := c.Log.validate(); err != nil {
		return err
	}
	if err := validatePprofListen(c.PprofListen); err != nil {
		return err
	}
	if err := c.Tracing.Validate("tracing"); err != nil {
		return err
	}
	if role == RoleMockUpstream {
		return c.MockUpstream.Config.Validate()
	}
	if err := c.Streams.Validate("streams"); err != nil {
		return err
	}
	if err := c.validateRegion(role); err != nil {
		return err
	}
	if role == RoleDev {
		if err := c.EmbeddedNATS.Validate("embedded_nats"); err != nil {
			return err
		}
		if err := c.MockUpstream.Config.Validate(); err != nil {
			return err
		}
	} else if err := c.NATS.Validate("nats"); err != nil {
		return err
	}
	if err := c.SetupNATS.Validate("setup_nats"); err != nil {
		return err
	}
	if role == RoleSetup {
		return nil
	}
	if n := c.NATS.Node; n != "" && c.Worker.ID != "" && c.Worker.ID != n && role == RoleWorker {
		return fmt.Errorf("worker.id: %q is not nats.node %q, the name its NATS user grants its quota demand key to (leave worker.id unset)", c.Worker.ID, n)
	}
	withMock := c
	if role == RoleDev && len(c.Providers) == 0 {
		// dev serves the fake upstream then; models may refer to it.
		withMock.Providers = []provider.Config{c.MockUpstream.AsProvider("http://127.0.0.1/v1")}
	}
	if _, err := withMock.Catalog(); err != nil {
		return err
	}
	if len(c.Providers) == 0 && role != RoleDev {
		return fmt.Errorf("providers: at least one provider required for %s", role)
	}
	if role == RoleDev || role == RoleEdge {
		if err := c.Edge.Validate("edge"); err != nil {
			return err
		}
		if err := c.validateFrontDoor(role); err != nil {
			return err
		}
	}
	if role == RoleDev || role == RoleWorker {
		if err := c.Worker.Validate("worker"); err != nil {
			return err
		}
	}
	if role == RoleDev || role == RoleCoordinator {
		if err := c.Coordinator.Validate("coordinator"); err != nil {
			return err
		}
	}
	return nil
}

func (l LogConfig) validate() error {
	switch l.Level {
	case "", "debug", "info", "warn", "error":
	default:
		return fmt.Errorf("log.level: %q is not debug, info, warn or error", l.Level)
	}
	switch l.Format {
	case "", "text", "json":
	default:
		return fmt.Errorf("log.format: %q is not text or json", l.Format)
	}
	return nil
}

// Handler returns the slog handler the log section asks for.
func (l LogConfig) Handler(w interface{ Write([]byte) (int, error) }) slog.Handler {
	var level slog.Level
	_ = level.UnmarshalText([]byte(l.Level)) // validated; "" stays info
	opts := &slog.HandlerOptions{Level: level, ReplaceAttr: durationString}
	if l.Format == "json" {
		return slog.NewJSONHandler(w, opts)
	}
	return slog.NewTextHandler(w, opts)
}

// durationString writes a time.Duration as a Go duration string ("1.5s",
// "350ms"): the JSON handler would write nanoseconds, which nobody reading
// a log line can tell from a count.
func durationString(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		a.Value = slog.StringValue(a.Value.Duration().String())
	}
	return a
}
