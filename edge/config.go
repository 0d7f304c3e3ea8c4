package edge

import (
	"fmt"
	"net"
	"time"

	"github.com/relaydev/relay/relay/spend"
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
	// TurnWait is how long a generation waits for its tenant's turn among
	// the workers' slots (admit_tenant_gate.go) before it is refused with
	// 429 and Retry-After; zero: DefaultTurnWait; negative: no bound.
	TurnWait time.Duration `koanf:"turn_wait"`
	// BodyTimeout is how long a request body may take to arrive, from the
	// end of its headers (zero: 30s; negative: no bound); a slower client
	// gets a 408 and its connection is closed (admit_body.go).
	BodyTimeout time.Duration `koanf:"body_timeout"`
	// MaxConnections caps the edge's open client connections, streams and
	// WebSockets included; at the cap an idle one makes room for a new
	// one, and without an idle one a new one is answered with a 503 and
	// closed (admit_conn_limit.go). Zero: 10,000; negative: no cap.
	MaxConnections int `koanf:"max_connections"`
	// MaxUnauthenticatedConnections is the share of MaxConnections that
	// connections no request has authenticated on yet may hold: at the
	// cap, past it, a new connection closes the oldest of them
	// (admit_conn_limit.go).
	// Zero: half of MaxConnections; negative: all of it.
	MaxUnauthenticatedConnections int `koanf:"max_unauthenticated_connections"`
	// MaxConnectionsPerTenant is how many connections one tenant's
	// requests may hold; a request of a tenant that holds as many on other
	// connections gets a 429 and its connection is closed. Zero: half of
	// MaxConnections on an edge that serves several tenants, no bound on
	// one that serves one; negative: no bound.
	MaxConnectionsPerTenant int `koanf:"max_connections_per_tenant"`
	// OpsListen is the host:port of the edge's ops listener, which serves
	// /healthz, /readyz and /metrics outside the API's connection cap and
	// its authentication (health.go), for probes and scrapes. Zero: a free
	// loopback port, logged at start. Used by main.
	OpsListen string `koanf:"ops_listen"`
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

	// APIKeys are the client keys the edge accepts as "Authorization:
	// Bearer <key>", each naming its tenant (admit_auth.go). Only their SHA-256
	// is configured. With none, every request is served as the anonymous
	// tenant: relay/config allows that only for `relay dev`, or with
	// AllowAnonymous.
	APIKeys []APIKey `koanf:"api_keys"`
	// AllowAnonymous serves requests without an Authorization header as
	// the anonymous tenant, next to APIKeys (a wrong key is still refused).
	// Off by default; outside `relay dev`, it must be set to run without
	// APIKeys.
	AllowAnonymous bool `koanf:"allow_anonymous"`
	// ResumeTokenSecret signs resume tokens (start_resume_token.go), which let a
	// client that cannot send headers (EventSource) resume its stream. All
	// edges of a cluster must share it. Zero: a random secret per process,
	// so only the edge that issued a token accepts it (fine for `relay
	// dev`; relay/config requires the secret elsewhere when APIKeys are
	// set). At least 32 bytes.
	ResumeTokenSecret string `koanf:"resume_token_secret"`
	// AllowExampleCredentials accepts the client keys and resume token
	// secrets the repository publishes (its examples, tests and CI
	// values), which relay/config refuses outside `relay dev`: for a local
	// demo (the compose cluster) or a test only, never on an edge others
	// can reach. The edge itself ignores it.
	AllowExampleCredentials bool `koanf:"allow_example_credentials"`
	// Spend sets tenants' budgets per UTC day and month (admit_spend_config.go);
	// zero: none, nothing is refused.
	Spend SpendConfig `koanf:"spend"`
	// ResumeTokenTTL is how long a resume token is valid (zero: 1h; at most
	// MaxResumeTokenTTL). A token lets anyone who holds it read the
	// stream, so a leaked one must die soon; verification refuses one that
	// expires later than this from now.
	ResumeTokenTTL time.Duration `koanf:"resume_token_ttl"`
	// IdempotencyWindow is how long an Idempotency-Key (or X-Request-Id)
	// attaches a repeated POST to the stream the first one started (zero:
	// 24h; at most streams.retention). Negative: the headers are ignored.
	IdempotencyWindow time.Duration `koanf:"idempotency_window"`
	// ChatModel is the model of a POST /v1/chats whose body names none
	// (handler_chats.go). Zero: none, such a request is a 400.
	ChatModel string `koanf:"chat_model"`
	// MaxMessages caps the messages of a request (zero: 256; negative: no
	// cap).
	MaxMessages int `koanf:"max_messages"`
	// MaxTokensCap is the largest max_tokens (and max_completion_tokens) a
	// request may ask for (zero: 32768; negative: no cap).
	MaxTokensCap int `koanf:"max_tokens_cap"`
	// WSMaxMessagesPerSecond is how many messages a WebSocket client may
	// send per second, in bursts of as many; a client that sends more is
	// closed with 1008 (zero: 20; negative: no limit).
	WSMaxMessagesPerSecond float64 `koanf:"ws_max_messages_per_second"`
	// CORSAllowedOrigins are the browser origins ("https://app.example.com")
	// allowed to call the API from another origin, and to open WebSockets;
	// "*" allows every origin. Zero: none (same-origin pages and
	// non-browser clients only).
	CORSAllowedOrigins []string `koanf:"cors_allowed_origins"`
	// AllowedHosts are the host names ("relay.internal", "*.example.com")
	// an edge that serves anonymous requests (no APIKeys, or
	// AllowAnonymous) answers to, besides IP addresses, localhost and its
	// subdomains, and the host of Listen; "*": any. Another Host gets a 403,
	// which stops a page from reaching the edge by DNS rebinding
	// (admit_hosts.go). Ignored with APIKeys alone.
	AllowedHosts []string `koanf:"allowed_hosts"`
	// Demo serves the demo chat at / and its helpers POST /v1/streams and
	// POST /v1/streams/{id}/drop (demo.go). Off by default, on by default
	// in `relay dev` (relay/config.Load).
	Demo bool `koanf:"demo"`
	// DurableStreams serves the Durable Streams protocol (durable_streams.go).
	DurableStreams DurableStreamsConfig `koanf:"durable_streams"`
}

// APIKey is one client key: the SHA-256 of the key, never the key itself
// (compute it with `printf %s "$KEY" | sha256sum`), and the tenant whose
// streams it may start, resume and cancel.
type APIKey struct {
	// Tenant owns the streams started with the key; required. Several keys
	// may share a tenant.
	Tenant string `koanf:"tenant"`
	// KeySHA256 is the hex SHA-256 of the key; required.
	KeySHA256 string `koanf:"key_sha256"`
	// Models, when set, are the only models the key may ask for; zero: every
	// model the relay serves.
	Models []string `koanf:"models"`
	// FailFast makes the key's generations fail at once, with a 503 and
	// Retry-After, when their provider cannot take them now, instead of
	// waiting for it (the default; see HeaderFailFast, which overrides it
	// per request).
	FailFast bool `koanf:"fail_fast"`
	// Operator makes the key an operator's: it may read /metrics, the
	// dashboard's data and the whole of /v1/relay/status, which show every
	// tenant and node (operator.go). A tenant's key may not.
	Operator bool `koanf:"operator"`
	// Budget caps what the key alone may spend per UTC day and month
	// (admit_spend.go); zero: no budget of its own, only its tenant's.
	Budget spend.Limits `koanf:"budget"`
}

// Defaults.
const (
	DefaultListen       = "127.0.0.1:8080"
	DefaultKeepalive    = 15 * time.Second
	DefaultRetryHint    = time.Second
	DefaultMaxBodyBytes = 1 << 20
	DefaultClientBuffer = 256
	DefaultBodyTimeout  = 30 * time.Second
	// DefaultTurnWait is the same bound as a call's wait for an open
	// breaker (breaker.max_wait).
	DefaultTurnWait = time.Minute

	DefaultMaxConnections = 10000

	DefaultResumeTokenTTL         = time.Hour
	DefaultIdempotencyWindow      = 24 * time.Hour
	DefaultMaxMessages            = 256
	DefaultMaxTokensCap           = 32768
	DefaultWSMaxMessagesPerSecond = 20
)

// MaxResumeTokenTTL caps Config.ResumeTokenTTL: whoever holds a token
// reads the stream, so a leaked one must not outlive the reconnects it is
// for; a day, the default streams.retention.
const MaxResumeTokenTTL = 24 * time.Hour

// minResumeTokenSecret is the shortest accepted resume token secret, in
// bytes: HMAC-SHA256 keys shorter than its output weaken it.
const minResumeTokenSecret = 32

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
	if c.BodyTimeout == 0 {
		c.BodyTimeout = DefaultBodyTimeout
	}
	if c.TurnWait == 0 {
		c.TurnWait = DefaultTurnWait
	}
	if c.MaxConnections == 0 {
		c.MaxConnections = DefaultMaxConnections
	}
	if c.ClientBuffer == 0 {
		c.ClientBuffer = DefaultClientBuffer
	}
	if c.ResumeTokenTTL == 0 {
		c.ResumeTokenTTL = DefaultResumeTokenTTL
	}
	if c.IdempotencyWindow == 0 {
		c.IdempotencyWindow = DefaultIdempotencyWindow
	}
	if c.MaxMessages == 0 {
		c.MaxMessages = DefaultMaxMessages
	}
	if c.MaxTokensCap == 0 {
		c.MaxTokensCap = DefaultMaxTokensCap
	}
	if c.WSMaxMessagesPerSecond == 0 {
		c.WSMaxMessagesPerSecond = DefaultWSMaxMessagesPerSecond
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
	if c.OpsListen != "" {
		if _, _, err := net.SplitHostPort(c.OpsListen); err != nil {
			return fmt.Errorf("%s.ops_listen: %q: %v", prefix, c.OpsListen, err)
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
	case c.ResumeTokenSecret != "" && len(c.ResumeTokenSecret) < minResumeTokenSecret:
		// The value is a secret: never part of the message.
		return fmt.Errorf("%s.resume_token_secret: shorter than %d bytes (generate one with `openssl rand -hex 32`)", prefix, minResumeTokenSecret)
	case c.ResumeTokenTTL < 0:
		return fmt.Errorf("%s.resume_token_ttl: must not be negative", prefix)
	case c.ResumeTokenTTL > MaxResumeTokenTTL:
		return fmt.Errorf("%s.resume_token_ttl: %v is longer than the maximum, %v", prefix, c.ResumeTokenTTL, MaxResumeTokenTTL)
	}
	if err := validateAPIKeys(c.APIKeys, prefix+".api_keys"); err != nil {
		return err
	}
	if err := c.Spend.validate(prefix, c.APIKeys); err != nil { // admit_spend_config.go
		return err
	}
	if err := c.DurableStreams.validate(prefix + ".durable_streams"); err != nil {
		return err
	}
	for i, h := range c.AllowedHosts {
		if err := validateHost(h); err != nil {
			return fmt.Errorf("%s.allowed_hosts[%d]: %w", prefix, i, err)
		}
	}
	for i, o := range c.CORSAllowedOrigins {
		if err := validateOrigin(o); err != nil {
			return fmt.Errorf("%s.cors_allowed_origins[%d]: %w", prefix, i, err)
		}
	}
	return nil
}
