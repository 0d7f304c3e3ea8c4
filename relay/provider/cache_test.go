package provider

import (
	"testing"
	"time"
)

// A model's cache is off unless it has a mode, serves every tenant unless
// it lists some, and keeps answers for a day unless it says otherwise.
func TestCacheFor(t *testing.T) {
	off := Cache{}
	all := Cache{Mode: CacheFallback}
	some := Cache{Mode: CachePrefer, TTL: time.Hour, Tenants: []string{"acme"}}
	for _, tc := range []struct {
		c      Cache
		tenant string
		want   bool
	}{
		{off, "acme", false},
		{all, "acme", true},
		{all, "", true},
		{some, "acme", true},
		{some, "beta", false},
	} {
		if got := tc.c.For(tc.tenant); got != tc.want {
			t.Errorf("%+v.For(%q) = %v, want %v", tc.c, tc.tenant, got, tc.want)
		}
	}
	if all.KeepFor() != DefaultCacheTTL || some.KeepFor() != time.Hour {
		t.Errorf("KeepFor: %v and %v, want %v and 1h", all.KeepFor(), some.KeepFor(), DefaultCacheTTL)
	}
}
