// Package natsconn connects a role to NATS the same way everywhere: with
// the configured credentials, reconnecting forever, and with JetStream.
package natsconn

import (
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/relay/natsperm"
)

// Config says where NATS is and how to authenticate. The zero value
// connects to nats://127.0.0.1:4222 without credentials.
type Config struct {
	// URL is a comma-separated list of server URLs.
	URL string `koanf:"url"`
	// Credentials; at most one kind may be set.
	User      string `koanf:"user"`
	Password  string `koanf:"password"`
	Token     string `koanf:"token"`
	NKeySeed  string `koanf:"nkey_seed_file"`
	CredsFile string `koanf:"creds_file"`
	// TLS: a CA file to trust, and a client certificate for mutual TLS.
	CAFile   string `koanf:"ca_file"`
	CertFile string `koanf:"cert_file"`
	KeyFile  string `koanf:"key_file"`
	// InboxPrefix starts the subject of every reply this connection asks
	// for, JetStream's included (zero: "_INBOX.<role>", or
	// "_INBOX.<role>.<node>" with Node; ForRole). A NATS user allowed to
	// subscribe only to its own prefix cannot read the replies meant for
	// another role or node: a worker's pulled requests, which carry the
	// prompts, or an edge's chunk reads (configs/nats).
	InboxPrefix string `koanf:"inbox_prefix"`
	// Node is this node's name in its own NATS identity (`relay nats
	// users`), whose grants name it: its reply prefix, and its quota demand
	// key. Zero: the node shares its role's user.
	Node string `koanf:"node"`
}

// DefaultInboxPrefix is the reply prefix of role's node when none is
// configured (node "": of a node that shares its role's user).
func DefaultInboxPrefix(role, node string) string { return natsperm.InboxPrefix(role, node) }

// ForRole is c with its default reply prefix as a node of role unless one
// is configured.
func (c Config) ForRole(role string) Config {
	if c.InboxPrefix == "" {
		c.InboxPrefix = DefaultInboxPrefix(role, c.Node)
	}
	return c
}

// HasCredentials reports whether c names credentials of any kind.
func (c Config) HasCredentials() bool {
	return c.User != "" || c.Password != "" || c.Token != "" || c.NKeySeed != "" || c.CredsFile != ""
}

// Validate names the first invalid field under prefix.
func (c Config) Validate(prefix string) error {
	if err := validateURLs(c.URL); err != nil {
		return fmt.Errorf("%s.url: %w", prefix, err)
	}
	kinds := 0
	for _, set := range []bool{c.User != "" || c.Password != "", c.Token != "", c.NKeySeed != "", c.CredsFile != ""} {
		if set {
			kinds++
		}
	}
	if kinds > 1 {
		return fmt.Errorf("%s: set only one of user/password, token, nkey_seed_file, creds_file", prefix)
	}
	if (c.CertFile == "") != (c.KeyFile == "") {
		return fmt.Errorf("%s.cert_file, %s.key_file: set both or neither", prefix, prefix)
	}
	if err := validateInboxPrefix(c.InboxPrefix); err != nil {
		return fmt.Errorf("%s.inbox_prefix: %w", prefix, err)
	}
	if c.Node != "" {
		if err := natsperm.ValidNode(c.Node); err != nil {
			return fmt.Errorf("%s.node: %w", prefix, err)
		}
	}
	return nil
}

// validateInboxPrefix refuses a prefix nats.go would reject at connect, so
// a role fails at start with the key named instead of retrying.
func validateInboxPrefix(p string) error {
	if p == "" {
		return nil
	}
	for _, tok := range strings.Split(p, ".") {
		if tok == "" || strings.ContainsAny(tok, "*> \t") {
			return fmt.Errorf("%q is not a subject of non-empty tokens without wildcards", p)
		}
	}
	return nil
}

// schemes are those the NATS client dials; a URL without one is nats://.
var schemes = []string{"nats", "tls", "ws", "wss"}

// validateURLs refuses a server URL the NATS client would not dial, such
// as an http:// one pasted from a monitoring port: the client would
// otherwise retry it forever.
func validateURLs(list string) error {
	if list == "" {
		return nil
	}
	for _, raw := range strings.Split(list, ",") {
		raw = strings.TrimSpace(raw)
		scheme, _, found := strings.Cut(raw, "://")
		if !found {
			continue // host:port
		}
		if !slices.Contains(schemes, strings.ToLower(scheme)) {
			shown := scheme + "://…"
			if u, err := url.Parse(raw); err == nil {
				shown = u.Redacted()
			}
			return fmt.Errorf("%s: scheme %q is not one of %s", shown, scheme, strings.Join(schemes, ", "))
		}
		if _, err := url.Parse(raw); err != nil {
			return err
		}
	}
	return nil
}

// Connect dials NATS. The connection reconnects forever: a role outlives a
// server restart and resumes where it was.
func Connect(cfg Config, name string, logger *slog.Logger) (*nats.Conn, jetstream.JetStream, error) {
	url := cfg.URL
	if url == "" {
		url = nats.DefaultURL
	}
	unreachable := &unreachableLog{url: redact(url), logger: logger}
	opts := []nats.Option{
		nats.Name(name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.ReconnectJitter(100*time.Millisecond, time.Second),
		nats.RetryOnFailedConnect(true),
		nats.ReconnectBufSize(16 << 20),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			logger.Warn("nats disconnected", "err", err)
		}),
		// With RetryOnFailedConnect a failed dial, the first one too, is
		// reported only here: without it a role that never reaches NATS
		// would wait in silence.
		nats.ReconnectErrHandler(func(_ *nats.Conn, err error) { unreachable.failed(err) }),
		nats.ConnectHandler(func(nc *nats.Conn) {
			unreachable.reset()
			logger.Info("nats connected", "url", nc.ConnectedUrlRedacted())
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			unreachable.reset()
			logger.Info("nats reconnected", "url", nc.ConnectedUrlRedacted())
		}),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			subject := ""
			if sub != nil {
				subject = sub.Subject
			}
			logger.Warn("nats async error", "subject", subject, "err", err)
		}),
	}
	switch {
	case cfg.User != "":
		opts = append(opts, nats.UserInfo(cfg.User, cfg.Password))
	case cfg.Token != "":
		opts = append(opts, nats.Token(cfg.Token))
	case cfg.NKeySeed != "":
		o, err := nats.NkeyOptionFromSeed(cfg.NKeySeed)
		if err != nil {
			return nil, nil, fmt.Errorf("natsconn: nkey seed: %w", err)
		}
		opts = append(opts, o)
	case cfg.CredsFile != "":
		opts = append(opts, nats.UserCredentials(cfg.CredsFile))
	}
	if cfg.InboxPrefix != "" {
		opts = append(opts, nats.CustomInboxPrefix(cfg.InboxPrefix))
	}
	if cfg.CAFile != "" {
		opts = append(opts, nats.RootCAs(cfg.CAFile))
	}
	if cfg.CertFile != "" {
		opts = append(opts, nats.ClientCert(cfg.CertFile, cfg.KeyFile))
	}
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("natsconn: connect %s: %w", url, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, fmt.Errorf("natsconn: jetstream: %w", err)
	}
	return nc, js, nil
}

// unreachableEvery spaces the lines that say NATS cannot be reached: the
// client dials several times a second, and one line per dial would bury
// the rest of the log.
var unreachableEvery = 5 * time.Second

// unreachableLog says, while the connection is down, that NATS cannot be
// reached: at the first failed dial, then every unreachableEvery with the
// number of dials since, until the connection is up again.
type unreachableLog struct {
	url    string
	logger *slog.Logger

	mu          sync.Mutex
	last        time.Time // of the last line; zero: none since connected
	failedDials int       // dials since that line
}

func (u *unreachableLog) failed(err error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.failedDials++
	if errors.Is(err, nats.ErrNoServers) {
		// The first connect reports a refused dial so, without its
		// cause; the next dial, within a second, reports it.
		return
	}
	now := time.Now()
	if !u.last.IsZero() && now.Sub(u.last) < unreachableEvery {
		return
	}
	u.logger.Warn("nats unreachable; retrying until it answers", "url", u.url, "err", err, "failed_dials", u.failedDials)
	u.last, u.failedDials = now, 0
}

func (u *unreachableLog) reset() {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.last, u.failedDials = time.Time{}, 0
}

// redact is list, a comma-separated list of URLs, with their passwords
// and tokens masked.
func redact(list string) string {
	urls := strings.Split(list, ",")
	for i, raw := range urls {
		raw = strings.TrimSpace(raw)
		if u, err := url.Parse(raw); err == nil && u.User != nil {
			if _, hasPassword := u.User.Password(); !hasPassword {
				u.User = url.User("xxxxx") // a token
			}
			raw = u.Redacted()
		}
		urls[i] = raw
	}
	return strings.Join(urls, ",")
}

// ErrNotConnected is returned by Ready when the connection is down.
var ErrNotConnected = errors.New("nats not connected")

// Ready reports whether nc is connected, for readiness probes.
func Ready(nc *nats.Conn) error {
	if !nc.IsConnected() {
		return ErrNotConnected
	}
	return nil
}
