package edge

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"hash"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/relaydev/relay/relay/wire"
)

// # Resume tokens
//
// A browser's EventSource cannot send an Authorization header, so the edge
// hands out a resume token with every stream it starts: in the
// HeaderResumeToken response header of the POST, in the "relay" object of
// the first SSE event, and in the WebSocket "started" message. It is
// accepted instead of a key by GET /v1/streams/{id}?token=<token>, for
// that stream only:
//
//	v1.<base64url(tenant)>.<expiry, Unix ms>.<base64url(HMAC-SHA256(secret, "relay-resume-v1" ‖ id ‖ tenant ‖ expiry))>
//
// The MAC binds the token to the stream id and the tenant; the expiry is
// issue time + Config.ResumeTokenTTL. Every edge of a cluster verifies every
// other's tokens, so they share Config.ResumeTokenSecret. A token that
// expires later than the edge's own TTL from now (beyond maxClockSkew) is
// refused, so that one forged with a leaked secret, or issued before the
// TTL was lowered, lives no longer than the TTL. A forged, expired,
// overlong or foreign token (another stream's) gets the same 403, checked before
// the stream is looked up, so the answer says nothing about whether the
// stream exists. Tokens are never logged.

// HeaderResumeToken carries the resume token of a started stream.
const HeaderResumeToken = "X-Relay-Resume-Token"

// CodeInvalidResumeToken answers a forged, expired or foreign token (403).
const CodeInvalidResumeToken = "invalid_resume_token"

// maxTokenLen bounds what is parsed: a real token is far shorter.
const maxTokenLen = 512

const tokenVersion = "v1"

// maxClockSkew is how far ahead of this edge's clock another edge's may
// run: a token it issued expires up to that much later than the TTL allows.
const maxClockSkew = time.Minute

type resumeTokens struct {
	secret []byte
	ttl    time.Duration
	now    func() time.Time
	// macs holds HMACs keyed with secret between uses: every stream
	// started issues a token, and a reset HMAC starts from its keyed state
	// without allocating or hashing the key again.
	macs sync.Pool
}

// newResumeTokens signs with secret, or with a random per-process secret
// when it is empty; random reports that.
func newResumeTokens(secret string, ttl time.Duration) (t *resumeTokens, random bool) {
	t = &resumeTokens{secret: []byte(secret), ttl: ttl, now: time.Now}
	if secret == "" {
		t.secret = make([]byte, 32)
		rand.Read(t.secret)
		random = true
	}
	return t, random
}

// mac appends the MAC of a token to b.
func (t *resumeTokens) mac(b []byte, id, tenant, expiry string) []byte {
	m, _ := t.macs.Get().(hash.Hash)
	if m == nil {
		m = hmac.New(sha256.New, t.secret)
	} else {
		m.Reset()
	}
	var msg [256]byte
	in := msg[:0]
	for _, part := range []string{"relay-resume-" + tokenVersion, id, tenant, expiry} {
		in = append(append(in, part...), 0)
	}
	m.Write(in)
	b = m.Sum(b)
	t.macs.Put(m)
	return b
}

// issue returns a token for stream id of tenant.
func (t *resumeTokens) issue(id, tenant string) string {
	var exp [20]byte
	expiry := strconv.AppendInt(exp[:0], t.now().Add(t.ttl).UnixMilli(), 10)
	enc := base64.RawURLEncoding
	var tok [256]byte
	b := append(tok[:0], tokenVersion+"."...)
	b = enc.AppendEncode(b, []byte(tenant))
	b = append(append(append(b, '.'), expiry...), '.')
	var sum [sha256.Size]byte
	return string(enc.AppendEncode(b, t.mac(sum[:0], id, tenant, string(expiry))))
}

// verify returns the tenant of a valid, unexpired token for stream id.
func (t *resumeTokens) verify(token, id string) (string, bool) {
	if len(token) > maxTokenLen {
		return "", false
	}
	parts := strings.Split(token, ".")
	if len(parts) != 4 || parts[0] != tokenVersion {
		return "", false
	}
	// Strict: one encoding per token, so an accepted token is exactly one
	// the edge issued.
	enc := base64.RawURLEncoding.Strict()
	tenant, err := enc.DecodeString(parts[1])
	if err != nil {
		return "", false
	}
	sig, err := enc.DecodeString(parts[3])
	if err != nil {
		return "", false
	}
	// The MAC first: what follows only reads what the edge itself wrote.
	if !hmac.Equal(sig, t.mac(nil, id, string(tenant), parts[2])) {
		return "", false
	}
	expiry, err := strconv.ParseInt(parts[2], 10, 64)
	now := t.now()
	if err != nil || now.UnixMilli() >= expiry || expiry > now.Add(t.ttl+maxClockSkew).UnixMilli() {
		return "", false
	}
	return string(tenant), true
}

// forbiddenToken is the one answer to every bad token: it does not say
// which check failed, nor whether the stream exists.
func forbiddenToken() *wire.Error {
	return &wire.Error{
		Message: "the resume token is not valid for this stream, or has expired",
		Type:    wire.TypeInvalidRequest,
		Param:   "token",
		Code:    CodeInvalidResumeToken,
		Status:  http.StatusForbidden,
	}
}
