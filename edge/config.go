package edge

import (
	"fmt"
	"net"
	"time"
)

// Config of the edge role, the `edge` section of the configuration. The zero
// value means the defaults.
type Config struct {
	// Listen is the host:port main listens on (zero: "127.0.0.1:8080"). The
	// Server itself never listens; it serves the listener it is handed.
	Listen string `koanf:"listen"`
	// Keepalive is how long a client connection may stay silent: an idle SSE
	// response gets a ": keepalive" comment and an idle WebSocket a ping
	// (zero: 15s). It cannot be switched off: proxies close silent
	// connections, and an idle follower uses the same tick to re-check the
	// log for frames it may have missed.
	Keepalive time.Duration `koanf:"keepalive"`
	// RetryHint is the SSE "retry:" field, how long an EventSource waits
	// before reconnecting (zero: 1s).
	RetryHint time.Duration `koanf:"retry_hint"`
	// MaxBodyBytes caps a chat completion request, and a WebSocket message
	// (zero: 1 MiB).
	MaxBodyBytes int64 `koanf:"max_body_bytes"`
	// ClientBuffer is how many live frames are queued for one client before
	// further ones are dropped and the client catches up from JetStream
	// instead (zero: 256).
	ClientBuffer int `koanf:"client_buffer"`
	// OnClientDisconnect is what happens to a generation whose starting
	// client goes away before the end: "continue" (zero: the generation
	// runs on and can be resumed) or "cancel_after <duration>" (cancel it
	// once no client on any edge has followed it for that long). A request
	// may override it with the X-Relay-On-Disconnect header; see
	// DisconnectPolicy.
	OnClientDisconnect DisconnectPolicy `koanf:"on_client_disconnect"`
}

// Defaults.
const (
	DefaultListen       = "127.0.0.1:8080"
	DefaultKeepalive    = 15 * time.Second
	DefaultRetryHint    = time.Second
	DefaultMaxBodyBytes = 1 << 20
	DefaultClientBuffer = 256
)

// minKeepalive keeps a misconfigured keepalive from turning into a busy loop
// of pings and log re-reads.
const minKeepalive = 10 * time.Millisecond

// WithDefaults fills zero fields.
func (c Config) WithDefaults() Config {
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	if c.Keepalive == 0 {
		c.Keepalive = DefaultKeepalive
	}
	if c.RetryHint == 0 {
		c.RetryHint = DefaultRetryHint
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.ClientBuffer == 0 {
		c.ClientBuffer = DefaultClientBuffer
	}
	return c
}

// Validate names the first invalid field under prefix (e.g. "edge").
func (c Config) Validate(prefix string) error {
	if c.Listen != "" {
		if _, _, err := net.SplitHostPort(c.Listen); err != nil {
			return fmt.Errorf("%s.listen: %q: %v", prefix, c.Listen, err)
		}
	}
	switch {
	case c.Keepalive < 0:
		return fmt.Errorf("%s.keepalive: must not be negative", prefix)
	case c.Keepalive > 0 && c.Keepalive < minKeepalive:
		return fmt.Errorf("%s.keepalive: %v is below %v", prefix, c.Keepalive, minKeepalive)
	case c.RetryHint < 0:
		return fmt.Errorf("%s.retry_hint: must not be negative", prefix)
	case c.MaxBodyBytes < 0:
		return fmt.Errorf("%s.max_body_bytes: must not be negative", prefix)
	case c.ClientBuffer < 0:
		return fmt.Errorf("%s.client_buffer: must not be negative", prefix)
	case c.OnClientDisconnect.CancelAfter < 0:
		return fmt.Errorf("%s.on_client_disconnect: cancel_after must be positive", prefix)
	}
	return nil
}
