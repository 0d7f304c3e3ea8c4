package worker

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"time"
	"unicode"

	"github.com/relaydev/relay/relay/wire"
)

// Config configures a worker. The zero value means the defaults.
type Config struct {
	// ID names the worker in claim frames and logs, so an operator can tell
	// which process wrote a stream. Zero: "<hostname>-<pid>-<random>", unique
	// across restarts of the same process.
	ID string `koanf:"id"`
	// MaxInflight is how many upstream streams the worker runs at once; each
	// is a slot pulling its own request. Zero: 1024. A generation waits on
	// its provider far more than it uses the CPU, and holds about 60 KiB
	// over HTTP/1.1, 50 over HTTP/2 (e2e/BENCHMARKS.md), so a worker
	// queueing requests at a few dozen streams would add latency that
	// calling the provider directly does not; idle slots cost a goroutine
	// each. At most 4096: the
	// worker's full heartbeat (every tenth) lists every request it holds,
	// about 150 bytes each, and must stay under NATS's default
	// max_payload of 1 MiB (at 4096 it is 0.6-0.75 MiB), or it is not sent
	// and watchers cannot hand the requests over.
	MaxInflight int `koanf:"max_inflight"`
	// KeysPollInterval is how often the worker checks whether a provider's
	// api_keys_file changed, to reload its keys. Zero: 1s; negative: never
	// (reload on SIGHUP only).
	KeysPollInterval time.Duration `koanf:"keys_poll_interval"`

	// HeartbeatInterval is how often the worker publishes its heartbeat,
	// describing the requests it holds (in full every tenth, what changed
	// in between), so that watchers hand them over soon after it dies (see
	// package liveness). Zero: 500ms; negative: no heartbeats, and a dead
	// worker's requests wait for streams.ack_wait.
	HeartbeatInterval time.Duration `koanf:"heartbeat_interval"`
	// LivenessTimeout is how long watchers wait after the worker's last
	// heartbeat before they hand its requests over. It travels in every
	// heartbeat, so coordinators and peers apply the worker's own value.
	// Zero: 1.5s; at least twice HeartbeatInterval. A paused worker (GC,
	// SIGSTOP) silent for longer loses its requests, and is fenced.
	LivenessTimeout time.Duration `koanf:"liveness_timeout"`
	// DisablePeerWatch stops this worker from watching the other workers'
	// heartbeats. By default every worker watches, so that requests are
	// handed over while no coordinator runs; each watcher receives every
	// heartbeat, which in a large fleet is worth leaving to the
	// coordinators (see configs/README.md).
	DisablePeerWatch bool `koanf:"disable_peer_watch"`
	// DrainTimeout is how long a draining worker (SIGTERM) lets its
	// streams run to their end; those still running then are handed to
	// another worker, which continues them at once. Zero: 10s; negative:
	// hand every stream over at once.
	DrainTimeout time.Duration `koanf:"drain_timeout"`
	// Listen is host:port of the worker's /healthz, /readyz and /metrics
	// (zero: a free loopback port, logged at start; set it for
	// Prometheus). Used by main.
	Listen string `koanf:"listen"`
	// AppendRetry bounds how long a job retries a chunk-log write or read
	// that failed for a reason other than losing the stream (NATS
	// restarting, a replica leader election), while the upstream keeps
	// streaming into memory, and its stream's usage record while the
	// ledger has no leader (usage_ledger.go). Zero: 30s; negative: no
	// retry.
	AppendRetry time.Duration `koanf:"append_retry"`
	// Tenants are the tenant names the worker's token and cost metrics
	// carry; every other tenant is counted as "other", which bounds the
	// label's values and keeps the names of the tenants out of what its
	// ops listener serves. Zero: none, every tenant is "other" (and
	// requests without a tenant "default").
	Tenants []string `koanf:"tenants"`
}

// Defaults and bounds.
const (
	DefaultMaxInflight       = 1024
	DefaultKeysPollInterval  = time.Second
	DefaultHeartbeatInterval = 500 * time.Millisecond
	DefaultLivenessTimeout   = wire.DefaultLivenessTimeout
	DefaultDrainTimeout      = 10 * time.Second
	DefaultAppendRetry       = 30 * time.Second
	minHeartbeatInterval     = 10 * time.Millisecond
	minLivenessTimeout       = 100 * time.Millisecond
	maxMaxInflight           = 1 << 12
	maxIDLen                 = 128
)

// Validate names the first invalid field under prefix (e.g. "worker").
func (c Config) Validate(prefix string) error {
	switch {
	case c.MaxInflight < 0 || c.MaxInflight > maxMaxInflight:
		return fmt.Errorf("%s.max_inflight: %d is not between 1 and %d (0 for the default %d)", prefix, c.MaxInflight, maxMaxInflight, DefaultMaxInflight)
	case len(c.ID) > maxIDLen:
		return fmt.Errorf("%s.id: longer than %d bytes", prefix, maxIDLen)
	case c.HeartbeatInterval > 0 && c.HeartbeatInterval < minHeartbeatInterval:
		return fmt.Errorf("%s.heartbeat_interval: %v is below %v", prefix, c.HeartbeatInterval, minHeartbeatInterval)
	case c.LivenessTimeout < 0:
		return fmt.Errorf("%s.liveness_timeout: must not be negative (a negative heartbeat_interval turns liveness off)", prefix)
	case c.LivenessTimeout > 0 && c.LivenessTimeout < minLivenessTimeout:
		return fmt.Errorf("%s.liveness_timeout: %v is below %v", prefix, c.LivenessTimeout, minLivenessTimeout)
	case c.LivenessTimeout > 0 && c.HeartbeatInterval >= 0 && c.LivenessTimeout < 2*cmp.Or(c.HeartbeatInterval, DefaultHeartbeatInterval):
		return fmt.Errorf("%s.liveness_timeout: %v is less than twice heartbeat_interval", prefix, c.LivenessTimeout)
	case c.LivenessTimeout == 0 && c.HeartbeatInterval > DefaultLivenessTimeout/2:
		return fmt.Errorf("%s.heartbeat_interval: %v needs a liveness_timeout of at least twice as much (the default is %v)", prefix, c.HeartbeatInterval, DefaultLivenessTimeout)
	case c.Listen != "" && !validListen(c.Listen):
		return fmt.Errorf("%s.listen: %q is not host:port", prefix, c.Listen)
	case strings.ContainsFunc(c.ID, func(r rune) bool { return unicode.IsSpace(r) || !unicode.IsPrint(r) }):
		return fmt.Errorf("%s.id: %q contains spaces or control characters", prefix, c.ID)
	}
	return nil
}

// withDefaults fills zero fields.
func (c Config) withDefaults() Config {
	if c.ID == "" {
		c.ID = defaultID()
	}
	if c.MaxInflight == 0 {
		c.MaxInflight = DefaultMaxInflight
	}
	if c.KeysPollInterval == 0 {
		c.KeysPollInterval = DefaultKeysPollInterval
	}
	if c.HeartbeatInterval == 0 {
		c.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if c.LivenessTimeout == 0 {
		c.LivenessTimeout = DefaultLivenessTimeout
	}
	if c.DrainTimeout == 0 {
		c.DrainTimeout = DefaultDrainTimeout
	}
	if c.AppendRetry == 0 {
		c.AppendRetry = DefaultAppendRetry
	}
	return c
}

// defaultID is unique per process: a restarted worker on the same host must
// not look like its previous incarnation in claim frames.
func defaultID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "worker"
	}
	var b [4]byte
	rand.Read(b[:])
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}
