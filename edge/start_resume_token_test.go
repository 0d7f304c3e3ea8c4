package edge

import (
	"encoding/base64"
	"strconv"
	"testing"
	"time"
)

// A token whose MAC is valid but whose expiry lies further ahead than the
// edge's TTL allows, as a ten-year one forged with a leaked secret, is
// refused; one issued by an edge whose clock runs a little ahead is not.
func TestResumeTokenLifetimeCapped(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tokens, _ := newResumeTokens(tokenSecret, time.Hour)
	tokens.now = func() time.Time { return now }
	signed := func(expiry time.Time) string {
		exp := strconv.FormatInt(expiry.UnixMilli(), 10)
		enc := base64.RawURLEncoding
		return tokenVersion + "." + enc.EncodeToString([]byte("acme")) + "." + exp + "." +
			enc.EncodeToString(tokens.mac(nil, "s1", "acme", exp))
	}
	for _, tc := range []struct {
		name   string
		expiry time.Time
		ok     bool
	}{
		{"issued now", now.Add(time.Hour), true},
		{"issued by an edge 30s ahead", now.Add(time.Hour + 30*time.Second), true},
		{"beyond the TTL and the clock skew", now.Add(time.Hour + maxClockSkew + time.Millisecond), false},
		{"ten years", now.AddDate(10, 0, 0), false},
	} {
		if tenant, ok := tokens.verify(signed(tc.expiry), "s1"); ok != tc.ok || (ok && tenant != "acme") {
			t.Errorf("%s: verify = %q, %v; want %v", tc.name, tenant, ok, tc.ok)
		}
	}
	if _, ok := tokens.verify(tokens.issue("s1", "acme"), "s1"); !ok {
		t.Error("a token the edge issued is refused")
	}
}
