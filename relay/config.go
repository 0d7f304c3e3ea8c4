package relay

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"time"
	"unicode"
)

// Config configures a worker. The zero value means the defaults.
type Config struct {
	// ID names the worker in claim frames and logs, so an operator can tell
	// which process wrote a stream. Zero: "<hostname>-<pid>-<random>", unique
	// across restarts of the same process.
	ID string `koanf:"id"`
	// MaxInflight is how many upstream streams the worker runs at once; each
	// is a slot pulling its own request. Zero: 64. At most 16384: every
	// slot holds one pull, and the worker consumer accepts 16384
	// outstanding pulls (MaxWaiting in protocol.Setup) from all workers
	// together.
	MaxInflight int `koanf:"max_inflight"`
	// KeysPollInterval is how often the worker checks whether a provider's
	// api_keys_file changed, to reload its keys. Zero: 1s; negative: never
	// (reload on SIGHUP only).
	KeysPollInterval time.Duration `koanf:"keys_poll_interval"`
}

// Defaults and bounds.
const (
	DefaultMaxInflight      = 64
	DefaultKeysPollInterval = time.Second
	maxMaxInflight          = 1 << 14
	maxIDLen                = 128
)

// Validate names the first invalid field under prefix (e.g. "worker").
func (c Config) Validate(prefix string) error {
	switch {
	case c.MaxInflight < 0 || c.MaxInflight > maxMaxInflight:
		return fmt.Errorf("%s.max_inflight: %d is not between 1 and %d (0 for the default %d)", prefix, c.MaxInflight, maxMaxInflight, DefaultMaxInflight)
	case len(c.ID) > maxIDLen:
		return fmt.Errorf("%s.id: longer than %d bytes", prefix, maxIDLen)
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
