package provider

import (
	"strings"
	"testing"
)

func TestCatalog(t *testing.T) {
	c, err := NewCatalog([]Config{
		{Name: "a", BaseURL: "http://127.0.0.1:1/v1", Models: []string{"m1", "m2"}},
		{Name: "b", BaseURL: "https://b.example/v1", Models: []string{"m2", "m3"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.Models(), ","); got != "m1,m2,m3" {
		t.Fatalf("Models() = %s", got)
	}
	if ps := c.For("m2"); len(ps) != 2 || ps[0].Name != "a" || ps[1].Name != "b" {
		t.Fatalf("For(m2) = %+v", ps)
	}
	if c.Serves("nope") {
		t.Fatal("serves an unknown model")
	}
}

func TestCatalogNamesTheBadKey(t *testing.T) {
	for _, tc := range []struct {
		providers []Config
		want      string
	}{
		{[]Config{{Name: "a b", BaseURL: "http://x/v1", Models: []string{"m"}}}, "providers[0].name"},
		{[]Config{{Name: "a", BaseURL: "ftp://x", Models: []string{"m"}}}, "providers[0].base_url"},
		{[]Config{{Name: "a", BaseURL: "http://x/v1"}}, "providers[0].models"},
		{[]Config{{Name: "a", BaseURL: "http://x/v1", Models: []string{"m"}}, {Name: "a", BaseURL: "http://y/v1", Models: []string{"m"}}}, "providers[1].name"},
	} {
		_, err := NewCatalog(tc.providers)
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("NewCatalog(%+v) err = %v, want prefix %s", tc.providers, err, tc.want)
		}
	}
}
