package edge

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"

	"github.com/gorilla/websocket"

	"github.com/relaydev/relay/relay/spend"
	"github.com/relaydev/relay/relay/wire"
	"maps"
	"slices"
	"time"
)

// # Authentication
//
// A client sends its key as "Authorization: Bearer <key>". The edge knows
// only the SHA-256 of each key (Config.APIKeys), hashes what it receives
// and compares it with every configured hash in constant time, so neither
// the keys nor the timing of a refusal tell anything about them. A key
// names a tenant: the streams it starts belong to the tenant, and only the
// tenant can resume, follow or cancel them; to anyone else such a stream
// answers like an unknown one (404).
//
//	request                                   served as
//	Authorization: Bearer <known key>         the key's tenant (models limited to the key's list)
//	Authorization: Bearer <anything else>     401 invalid_api_key
//	X-Api-Key: <key>                          on /v1/messages paths, as Authorization (Anthropic's
//	                                          clients send it); it wins over Authorization there
//	WebSocket subprotocols "relay",           as "Authorization: Bearer <key>", for browsers, which
//	"relay.bearer.<base64url(key)>"           cannot set headers on a WebSocket; the edge selects
//	                                          "relay" and never echoes the credential
//	GET /v1/streams/{id}?token=<resume token> the token's tenant, for that stream only;
//	                                          403 invalid_resume_token if forged, expired or
//	                                          for another stream (start_resume_token.go); the same
//	                                          for GET /v1/responses/resp_{id}
//	neither                                   the anonymous tenant if no keys are configured
//	                                          or AllowAnonymous; 401 invalid_api_key otherwise
//
// With no keys configured at all the Authorization header is ignored (the
// OpenAI SDKs always send one). Only the API, the paths under /v1/, is
// authenticated here: /healthz and /readyz are open, /metrics asks for an
// operator's key (operator.go), and a CORS preflight is answered before
// authentication (admit_cors.go).

// CodeInvalidAPIKey answers a missing or unknown API key (401).
const CodeInvalidAPIKey = "invalid_api_key"

// principal is who a request acts for.
type principal struct {
	// tenant owns the streams the request starts and may touch; "" is the
	// anonymous tenant.
	tenant string
	// models limits the models the request may ask for; nil: all.
	models map[string]bool
	// failFast: the key's generations fail at once when their provider
	// cannot take them now (APIKey.FailFast).
	failFast bool
	// operator may read what concerns every tenant (operator.go).
	operator bool
	// key names the key in the usage ledger (spend.KeyID); "" without one.
	key string
}

// allows reports whether the principal may ask for model.
func (p principal) allows(model string) bool { return p.models == nil || p.models[model] }

// modelList is p's models, sorted; nil: all (wire.Request.Models).
func (p principal) modelList() []string {
	if p.models == nil {
		return nil
	}
	return slices.Sorted(maps.Keys(p.models))
}

// keyEntry is one configured key.
type keyEntry struct {
	hash []byte
	p    principal
}

// authenticator checks API keys.
type authenticator struct {
	keys []keyEntry
	// anonymous serves requests without credentials as the anonymous
	// tenant.
	anonymous bool
}

func newAuthenticator(keys []APIKey, allowAnonymous bool) *authenticator {
	a := &authenticator{anonymous: allowAnonymous || len(keys) == 0}
	for _, k := range keys {
		hash, _ := hex.DecodeString(k.KeySHA256) // validated
		p := principal{tenant: k.Tenant, failFast: k.FailFast, operator: k.Operator, key: spend.KeyID(k.KeySHA256)}
		if len(k.Models) > 0 {
			p.models = map[string]bool{}
			for _, m := range k.Models {
				p.models[m] = true
			}
		}
		a.keys = append(a.keys, keyEntry{hash: hash, p: p})
	}
	return a
}

// enabled reports whether keys are configured at all.
func (a *authenticator) enabled() bool { return len(a.keys) > 0 }

// key returns the principal of a presented key. Every configured hash is
// compared, whichever matches, so the time taken does not depend on which
// one (if any) does.
func (a *authenticator) key(key string) (principal, bool) {
	sum := sha256.Sum256([]byte(key))
	var found principal
	match := 0
	for _, k := range a.keys {
		eq := subtle.ConstantTimeCompare(sum[:], k.hash)
		if eq == 1 {
			found = k.p
		}
		match |= eq
	}
	return found, match == 1
}

// wsProtocol is the WebSocket subprotocol the edge speaks, and
// wsBearerPrefix starts the subprotocol that carries a browser's key,
// base64url-encoded (without padding) so that any key is a valid
// subprotocol token.
const (
	wsProtocol     = "relay"
	wsBearerPrefix = "relay.bearer."
)

// credential finds the API key a request carries: in its Authorization
// header, or else in a WebSocket subprotocol, or, on the Messages API's
// paths, in X-Api-Key, where Anthropic's clients send it. found is false
// without one; a malformed one is an error.
func credential(r *http.Request) (key string, found bool, e *wire.Error) {
	if key := strings.TrimSpace(r.Header.Get("X-Api-Key")); key != "" && isMessagesPath(r.URL.Path) {
		return key, true, nil
	}
	if h := r.Header.Get("Authorization"); h != "" {
		key, ok := bearer(h)
		if !ok {
			return "", false, unauthorized("the Authorization header must be \"Bearer <API key>\"")
		}
		return key, true, nil
	}
	for _, p := range websocket.Subprotocols(r) {
		encoded, ok := strings.CutPrefix(p, wsBearerPrefix)
		if !ok {
			continue
		}
		b, err := base64.RawURLEncoding.DecodeString(encoded)
		if err != nil || len(b) == 0 {
			return "", false, unauthorized("the " + wsBearerPrefix + " subprotocol must carry the API key, base64url-encoded without padding")
		}
		return string(b), true, nil
	}
	return "", false, nil
}

// bearer extracts the key of an "Authorization: Bearer <key>" header.
func bearer(h string) (string, bool) {
	scheme, key, ok := strings.Cut(strings.TrimSpace(h), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	key = strings.TrimSpace(key)
	return key, key != ""
}

type principalKey struct{}

// principalOf is the principal the authentication middleware found for r;
// the anonymous one for requests it did not authenticate (/healthz).
func principalOf(r *http.Request) principal {
	p, _ := r.Context().Value(principalKey{}).(principal)
	return p
}

// withAuthentication authenticates every API request (under /v1/) and
// stores its principal in the request's context, or answers 401 (403 for a
// bad resume token). Nothing about a refused credential is logged.
func (s *Server) withAuthentication(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/v1/") {
			next.ServeHTTP(w, r)
			return
		}
		p, e := s.authenticate(r)
		if e != nil {
			if e.Status == http.StatusUnauthorized {
				w.Header().Set("WWW-Authenticate", `Bearer realm="relay"`)
			}
			// The refusal is decided on the headers, and its connection
			// closes at once after it: net/http would otherwise read the
			// unread body, before the answer and again at the end of the
			// request, so a client that sends one byte of a long body
			// would hold its connection, and a slot of the connection
			// cap, until edge.body_timeout. A read deadline in the past
			// ends that read (ErrNotSupported: a writer without one).
			w.Header().Set("Connection", "close")
			_ = http.NewResponseController(w).SetReadDeadline(time.Now())
			writeError(w, e)
			return
		}
		if !claimConn(r, p.tenant) { // admit_conn_limit.go
			w.Header().Set("Connection", "close")
			_ = http.NewResponseController(w).SetReadDeadline(time.Now())
			writeError(w, s.tenantConnections())
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), principalKey{}, p)))
	})
}

func (s *Server) authenticate(r *http.Request) (principal, *wire.Error) {
	key, found, e := credential(r)
	if e != nil && s.auth.enabled() {
		return principal{}, e
	}
	if found && s.auth.enabled() {
		p, ok := s.auth.key(key)
		if !ok {
			return principal{}, unauthorized("Incorrect API key provided.")
		}
		return p, nil
	}
	if token := r.URL.Query().Get("token"); token != "" && r.Method == http.MethodGet {
		if id, ok := tokenStream(r.URL.Path); ok {
			tenant, ok := s.tokens.verify(token, id)
			if !ok {
				return principal{}, forbiddenToken()
			}
			return principal{tenant: tenant}, nil
		}
	}
	if s.auth.anonymous {
		return principal{}, nil
	}
	return principal{}, unauthorized("You didn't provide an API key. Send it in an Authorization header using Bearer auth (Authorization: Bearer YOUR_KEY).")
}

// tokenStream is the stream a GET of path reads, if a resume token may
// stand for the key there: a stream, or the Response or Message of one.
func tokenStream(path string) (string, bool) {
	for _, prefix := range []string{"/v1/streams/", "/v1/responses/resp_", "/v1/messages/msg_"} {
		if id, ok := strings.CutPrefix(path, prefix); ok && !strings.Contains(id, "/") {
			return id, true
		}
	}
	return "", false
}

func unauthorized(message string) *wire.Error {
	return &wire.Error{Message: message, Type: wire.TypeInvalidRequest, Code: CodeInvalidAPIKey, Status: http.StatusUnauthorized}
}

// validTenant: letters, digits, '.', '-' and '_', at most 64.
func validTenant(t string) bool {
	if t == "" || len(t) > 64 {
		return false
	}
	return strings.IndexFunc(t, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' || r == '_')
	}) < 0
}

// validateAPIKeys names the first bad key entry under prefix
// ("edge.api_keys").
func validateAPIKeys(keys []APIKey, prefix string) error {
	seen := map[string]bool{}
	for i, k := range keys {
		at := fmt.Sprintf("%s[%d]", prefix, i)
		if !validTenant(k.Tenant) {
			return fmt.Errorf("%s.tenant: %q: want 1 to 64 letters, digits, '.', '-' or '_'", at, k.Tenant)
		}
		hash, err := hex.DecodeString(k.KeySHA256)
		if err != nil || len(hash) != sha256.Size {
			// The value is not echoed: it may be a key pasted by mistake.
			return fmt.Errorf("%s.key_sha256: not a hex SHA-256 (64 hex digits; compute it with `printf %%s \"$KEY\" | sha256sum`)", at)
		}
		lower := strings.ToLower(k.KeySHA256)
		if seen[lower] {
			return fmt.Errorf("%s.key_sha256: the same key is configured twice", at)
		}
		seen[lower] = true
		for j, m := range k.Models {
			if m == "" {
				return fmt.Errorf("%s.models[%d]: empty model name", at, j)
			}
		}
	}
	return nil
}
