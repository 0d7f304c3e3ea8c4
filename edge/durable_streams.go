package edge

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/relaydev/relay/edge/durable"
	"github.com/relaydev/relay/relay/chunklog"
	"github.com/relaydev/relay/relay/dialect/uimessage"
	store "github.com/relaydev/relay/relay/durable"
	"github.com/relaydev/relay/relay/wire"
)

// DurableStreamsConfig configures the Durable Streams protocol the edge
// serves under Prefix (edge/durable, relay/durable).
type DurableStreamsConfig struct {
	// Prefix is the path the streams are served under; any path below it
	// names a stream (zero: "/ds").
	Prefix string `koanf:"prefix"`
	// LongPollTimeout is how long a live=long-poll read waits for data
	// before it answers 204 (zero: 20s).
	LongPollTimeout time.Duration `koanf:"long_poll_timeout"`
	// SSEDuration is how long a live=sse response lasts before the edge
	// ends it and the client reconnects from its last offset, which lets
	// caches collapse readers (zero: 60s).
	SSEDuration time.Duration `koanf:"sse_duration"`
	// MaxAppendBytes bounds the body of a PUT or POST; a larger one gets a
	// 413 (zero: 512 KiB; at most 640 KiB, so that one append stays one
	// message of NATS's default 1 MiB payload, base64 included).
	MaxAppendBytes int64 `koanf:"max_append_bytes"`
}

// Defaults of DurableStreamsConfig.
const (
	DefaultDurableStreamsPrefix = "/ds"
	DefaultLongPollTimeout      = 20 * time.Second
	DefaultSSEDuration          = time.Minute
	DefaultMaxAppendBytes       = 512 << 10
	maxAppendBytes              = 640 << 10
)

func (c DurableStreamsConfig) withDefaults() DurableStreamsConfig {
	if c.Prefix == "" {
		c.Prefix = DefaultDurableStreamsPrefix
	}
	if c.LongPollTimeout == 0 {
		c.LongPollTimeout = DefaultLongPollTimeout
	}
	if c.SSEDuration == 0 {
		c.SSEDuration = DefaultSSEDuration
	}
	if c.MaxAppendBytes == 0 {
		c.MaxAppendBytes = DefaultMaxAppendBytes
	}
	return c
}

func (c DurableStreamsConfig) validate(prefix string) error {
	switch {
	case c.Prefix != "" && (!strings.HasPrefix(c.Prefix, "/") || strings.HasSuffix(c.Prefix, "/") || strings.HasPrefix(c.Prefix, "/v1")):
		return fmt.Errorf("%s.prefix: %q must start with / and not end with one, outside /v1", prefix, c.Prefix)
	case c.LongPollTimeout < 0:
		return fmt.Errorf("%s.long_poll_timeout: must not be negative", prefix)
	case c.SSEDuration < 0:
		return fmt.Errorf("%s.sse_duration: must not be negative", prefix)
	case c.MaxAppendBytes < 0 || c.MaxAppendBytes > maxAppendBytes:
		return fmt.Errorf("%s.max_append_bytes: must be between 0 and %d", prefix, maxAppendBytes)
	}
	return nil
}

// durableStreams is the handler of the Durable Streams protocol, mounted
// under its prefix (routes.go).
func (s *Server) durableStreams() (string, http.Handler) {
	cfg := s.cfg.DurableStreams.withDefaults()
	h := durable.New(durable.Config{
		Prefix:          cfg.Prefix,
		LongPollTimeout: cfg.LongPollTimeout,
		SSEDuration:     cfg.SSEDuration,
		MaxAppendBytes:  cfg.MaxAppendBytes,
		Keepalive:       s.cfg.Keepalive,
	}, durable.Deps{
		Store: store.New(s.js, s.reader, s.parts.nextDurable),
		NC:    s.nc,
		Offsets: func(ctx context.Context) (*wire.CursorKey, error) {
			return s.cursors.get(ctx)
		},
		Authorize:   s.durableAccess,
		IssueToken:  s.tokens.issue,
		WriteError:  writeError,
		Generations: &generations{s: s, retention: map[string]time.Duration{}},
		Dialects:    map[string]durable.Dialect{"ui": uiDialect},
		Logger:      s.log,
		Drain:       s.clients.stopping(),
	})
	return cfg.Prefix + "/", h
}

// uiDialect reads a generation as the AI SDK's UI message chunks, the
// messages a Durable Streams chat transport reads: the stream of
// POST /v1/chats, chunk for chunk; a snapshot folds the deltas of a part
// that follow each other into one.
var uiDialect = durable.Dialect{Replays: true, New: func(g durable.Generation) durable.Renderer {
	return &uiRenderer{enc: uimessage.NewEncoder(uimessage.MessageID(g.ID))}
}}

// uiRenderer renders with enc; folded holds the snapshot's chunks so far
// (n of them).
type uiRenderer struct {
	enc    *uimessage.Encoder
	folded []byte
	n      int
}

func (r *uiRenderer) Render(b []byte, _ wire.Cursor, f *wire.Frame) ([]byte, int) {
	n := 0
	r.enc.Frame(*f, func(chunk []byte) { b, n = appendMessage(b, n, chunk) })
	return b, n
}

func (r *uiRenderer) Fold(_ wire.Cursor, f *wire.Frame) {
	r.enc.Fold()
	r.enc.Frame(*f, func(chunk []byte) { r.folded, r.n = appendMessage(r.folded, r.n, chunk) })
}

func (r *uiRenderer) Snapshot(b []byte) ([]byte, int) {
	r.enc.Unfold(func(chunk []byte) { r.folded, r.n = appendMessage(r.folded, r.n, chunk) })
	b, n := append(b, r.folded...), r.n
	r.folded, r.n = nil, 0
	return b, n
}

// appendMessage appends the n+1st message of a comma-separated list.
func appendMessage(b []byte, n int, msg []byte) ([]byte, int) {
	if n > 0 {
		b = append(b, ',')
	}
	return append(b, msg...), n + 1
}

// generations is what edge/durable reads of the relay's generations.
type generations struct {
	s         *Server
	mu        sync.Mutex
	retention map[string]time.Duration // by chunk stream, once read
}

func (g *generations) Meta(ctx context.Context, id string) (wire.Meta, error) {
	meta, _, err := g.s.meta.get(ctx, id)
	if errors.Is(err, errNoMeta) {
		return wire.Meta{}, store.ErrNotFound
	}
	return meta, err
}

// Retention is the chunk stream's MaxAge, read once per partition.
func (g *generations) Retention(ctx context.Context, id string) (time.Duration, error) {
	name := wire.ChunkStreamOf(id)
	g.mu.Lock()
	d, ok := g.retention[name]
	g.mu.Unlock()
	if ok {
		return d, nil
	}
	st, err := g.s.js.Stream(ctx, name)
	if err != nil {
		return 0, err
	}
	info, err := st.Info(ctx)
	if err != nil {
		return 0, err
	}
	g.mu.Lock()
	g.retention[name] = info.Config.MaxAge
	g.mu.Unlock()
	return info.Config.MaxAge, nil
}

func (g *generations) Reader() *chunklog.Reader { return g.s.reader }

// durableAccess authenticates a Durable Streams request as the API's are
// (withAuthentication): a key names the tenant, and a read may carry the
// stream's resume token in ?token= instead. A refusal closes the
// connection without reading the body; an accepted request takes its
// tenant's share of the connections (admit_conn_limit.go).
func (s *Server) durableAccess(w http.ResponseWriter, r *http.Request) (durable.Access, *wire.Error) {
	acc, e := s.durablePrincipal(r)
	if e == nil && !claimConn(r, acc.Tenant) {
		e = s.tenantConnections()
	}
	if e != nil {
		if e.Status == http.StatusUnauthorized {
			w.Header().Set("WWW-Authenticate", `Bearer realm="relay"`)
		}
		w.Header().Set("Connection", "close")
		_ = http.NewResponseController(w).SetReadDeadline(time.Now())
		return durable.Access{}, e
	}
	return acc, nil
}

// durablePrincipal is who a Durable Streams request acts for.
func (s *Server) durablePrincipal(r *http.Request) (durable.Access, *wire.Error) {
	token := r.URL.Query().Get("token")
	if _, found, _ := credential(r); !found && token != "" && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
		tenant, ok := tokenTenant(token)
		if !ok {
			return durable.Access{}, forbiddenToken()
		}
		return durable.Access{Tenant: tenant, Token: token, Verify: s.tokens.verify}, nil
	}
	p, e := s.authenticate(r)
	if e != nil {
		return durable.Access{}, e
	}
	return durable.Access{Tenant: p.tenant}, nil
}

// tokenTenant is the tenant a resume token says it was issued to, which
// only verify confirms.
func tokenTenant(token string) (string, bool) {
	parts := strings.Split(token, ".")
	if len(token) > maxTokenLen || len(parts) != 4 || parts[0] != tokenVersion {
		return "", false
	}
	tenant, err := base64.RawURLEncoding.Strict().DecodeString(parts[1])
	return string(tenant), err == nil
}
