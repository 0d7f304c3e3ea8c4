package provider

import (
	"strings"
	"testing"
	"time"
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

func TestRoute(t *testing.T) {
	c, err := NewCatalog([]Config{
		{Name: "a", BaseURL: "http://a/v1", Models: []string{"m1", "m2"}, BackupProviders: []string{"c", "d"}},
		{Name: "b", BaseURL: "http://b/v1", Models: []string{"m1"}, BackupProviders: []string{"a"}},
		{Name: "c", BaseURL: "http://c/v1", Models: []string{"m1", "m3"}},
		{Name: "d", BaseURL: "http://d/v1", Models: []string{"m2", "m3"}},
	}, Model{Name: "m1", Fallbacks: []Fallback{{Model: "m3"}, {Model: "m2", Provider: "a"}}})
	if err != nil {
		t.Fatal(err)
	}
	route := func(model string) string {
		var steps []string
		for _, s := range c.Route(model) {
			steps = append(steps, s.Provider.Name+"/"+s.Model)
		}
		return strings.Join(steps, " ")
	}
	for model, want := range map[string]string{
		// a, then its backup c (d does not serve m1), then b (whose
		// backup a came already); then the fallbacks: m3 everywhere, m2
		// on a only.
		"m1": "a/m1 c/m1 b/m1 c/m3 d/m3 a/m2",
		"m2": "a/m2 d/m2",
		"m3": "c/m3 d/m3",
		"m4": "",
	} {
		if got := route(model); got != want {
			t.Errorf("Route(%s) = %q, want %q", model, got, want)
		}
	}
}

// TestRouteIsSharedAndAnAppendCopies holds the catalog's routes, which
// every request shares, safe from a caller that appends to one.
func TestRouteIsSharedAndAnAppendCopies(t *testing.T) {
	c, err := NewCatalog([]Config{
		{Name: "a", BaseURL: "http://a/v1", Models: []string{"m1"}},
		{Name: "b", BaseURL: "http://b/v1", Models: []string{"m1"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	r := c.Route("m1")
	if again := c.Route("m1"); &again[0] != &r[0] {
		t.Error("Route worked the route out again; want the catalog's own")
	}
	grown := append(r, Candidate{Model: "extra"})
	grown[0].Model = "changed"
	if got := c.Route("m1"); len(got) != 2 || got[0].Model != "m1" {
		t.Errorf("after an append to a route and a write to the copy, Route = %+v; want the catalog's two candidates unchanged", got)
	}
}

func TestRouteSettings(t *testing.T) {
	c, err := NewCatalog([]Config{
		{Name: "a", BaseURL: "http://a/v1", Models: []string{"m1", "m2", "m3"}, Continuation: Prompt, ContinuePrompt: "go on"},
		{Name: "b", BaseURL: "http://b/v1", Models: []string{"m1"}},
	},
		Model{Name: "m1", Continuation: Prefill, MaxRetriesPerModel: 5, Price: Price{InputPerMTok: 2, OutputPerMTok: 8}},
		Model{Name: "m2", MaxRetriesPerModel: -1, ContinuePrompt: "resume"},
	)
	if err != nil {
		t.Fatal(err)
	}
	type settings struct {
		retries int
		mode    Continuation
		prompt  string
		price   Price
	}
	for _, tc := range []struct {
		model string
		want  []settings
	}{
		{"m1", []settings{{5, Prefill, "go on", Price{2, 8}}, {5, Prefill, DefaultContinuePrompt, Price{2, 8}}}},
		{"m2", []settings{{0, Prompt, "resume", Price{}}}},
		{"m3", []settings{{DefaultMaxRetriesPerModel, Prompt, "go on", Price{}}}},
	} {
		route := c.Route(tc.model)
		if len(route) != len(tc.want) {
			t.Fatalf("Route(%s) has %d steps, want %d", tc.model, len(route), len(tc.want))
		}
		for i, s := range route {
			if got := (settings{s.MaxRetries, s.Continuation, s.ContinuePrompt, s.Price}); got != tc.want[i] {
				t.Errorf("Route(%s)[%d] settings = %+v, want %+v", tc.model, i, got, tc.want[i])
			}
		}
	}
}

func TestCatalogRejectsBadRoutes(t *testing.T) {
	p := func(name string, models []string, backups ...string) Config {
		return Config{Name: name, BaseURL: "http://" + name + "/v1", Models: models, BackupProviders: backups}
	}
	ab := []Config{p("a", []string{"m1"}), p("b", []string{"m2"})}
	for _, tc := range []struct {
		name      string
		providers []Config
		models    []Model
		want      string
	}{
		{"unknown backup", []Config{p("a", []string{"m1"}, "z")}, nil, "providers[0].backup_providers[0]: no provider"},
		{"backup is itself", []Config{p("a", []string{"m1"}, "a")}, nil, "providers[0].backup_providers[0]: \"a\" is the provider itself"},
		{"backup twice", []Config{p("a", []string{"m1"}, "b", "b"), p("b", []string{"m1"})}, nil, "providers[0].backup_providers[1]: \"b\" is listed twice"},
		{"backup serves nothing shared", []Config{p("a", []string{"m1"}), p("b", []string{"m2"}, "a")}, nil, "providers[1].backup_providers[0]: \"a\" serves none"},
		{"model without name", ab, []Model{{}}, "models[0].name: required"},
		{"model not served", ab, []Model{{Name: "m9"}}, "models[0].name: no provider serves"},
		{"model twice", ab, []Model{{Name: "m1"}, {Name: "m1"}}, "models[1].name: \"m1\" has two entries"},
		{"fallback without model", ab, []Model{{Name: "m1", Fallbacks: []Fallback{{}}}}, "models[0].fallbacks[0].model: required"},
		{"fallback not served", ab, []Model{{Name: "m1", Fallbacks: []Fallback{{Model: "m9"}}}}, "models[0].fallbacks[0].model: no provider serves"},
		{"fallback on unknown provider", ab, []Model{{Name: "m1", Fallbacks: []Fallback{{Model: "m2", Provider: "z"}}}}, "models[0].fallbacks[0].provider: no provider"},
		{"fallback provider lacks model", ab, []Model{{Name: "m1", Fallbacks: []Fallback{{Model: "m2", Provider: "a"}}}}, "models[0].fallbacks[0].model: provider \"a\" does not serve"},
		{"bad model continuation", ab, []Model{{Name: "m1", Continuation: "guess"}}, "models[0].continuation:"},
		{"negative price", ab, []Model{{Name: "m1", Price: Price{OutputPerMTok: -1}}}, "models[0].price.output_per_mtok:"},
		{"unknown cache mode", ab, []Model{{Name: "m1", Cache: Cache{Mode: "always"}}}, "models[0].cache.mode:"},
		{"cache ttl past the bucket's", ab, []Model{{Name: "m1", Cache: Cache{Mode: CacheFallback, TTL: 8 * 24 * time.Hour}}}, "models[0].cache.ttl:"},
		{"cache tenants without a mode", ab, []Model{{Name: "m1", Cache: Cache{Tenants: []string{"acme"}}}}, "models[0].cache.mode: required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewCatalog(tc.providers, tc.models...)
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("err = %v, want prefix %q", err, tc.want)
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	ok := Config{Name: "a", BaseURL: "http://a/v1", Models: []string{"m"}}
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"keys and key file", func(c *Config) { c.APIKeys, c.APIKeysFile = []string{"k"}, "/keys" }, "p.api_keys_file:"},
		{"empty key", func(c *Config) { c.APIKeys = []string{"k", ""} }, "p.api_keys[1]:"},
		{"bad retry", func(c *Config) { c.Retry.Base = -1 }, "p.retry.base:"},
		{"bad continuation", func(c *Config) { c.Continuation = "resume" }, "p.continuation:"},
		{"bad probe", func(c *Config) { c.Probe = "ping" }, "p.probe:"},
		{"bad type", func(c *Config) { c.Type = "gemini" }, "p.type:"},
		{"prefill on responses", func(c *Config) { c.Type, c.Continuation = TypeOpenAIResponses, Prefill }, "p.continuation:"},
		{"h2c over https", func(c *Config) { c.BaseURL, c.HTTP2PriorKnowledge = "https://a/v1", true }, "p.http2_prior_knowledge:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ok
			tc.edit(&c)
			if err := c.Validate("p"); err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("err = %v, want prefix %q", err, tc.want)
			}
		})
	}
	if err := ok.Validate("p"); err != nil {
		t.Errorf("valid config: %v", err)
	}
	h2c := ok
	h2c.HTTP2PriorKnowledge = true
	if err := h2c.Validate("p"); err != nil {
		t.Errorf("h2c to an http base_url: %v", err)
	}
	if !h2c.Target("k").HTTP2PriorKnowledge {
		t.Error("the target of an h2c provider does not ask for h2c")
	}
}

func TestTimeoutBounds(t *testing.T) {
	var c Config
	if c.FirstTokenBound() != DefaultFirstTokenTimeout || c.StallBound() != DefaultStallTimeout {
		t.Errorf("zero config bounds = %v, %v", c.FirstTokenBound(), c.StallBound())
	}
	c.FirstTokenTimeout, c.StallTimeout = -1, time.Second
	if c.FirstTokenBound() >= 0 || c.StallBound() != time.Second {
		t.Errorf("bounds = %v, %v; want off and 1s", c.FirstTokenBound(), c.StallBound())
	}
}

func TestPriceCost(t *testing.T) {
	p := Price{InputPerMTok: 2, OutputPerMTok: 8}
	if got := p.Cost(1_000_000, 500_000); got != 6 {
		t.Errorf("cost = %v, want 6", got)
	}
	if got := (Price{}).Cost(1000, 1000); got != 0 {
		t.Errorf("unpriced cost = %v", got)
	}
}

func TestProbeDefaults(t *testing.T) {
	c := Config{Models: []string{"m1", "m2"}}
	if c.ProbeKind() != ProbeChat || c.ProbeModelFor("") != "m1" || c.ProbeModelFor("m2") != "m2" {
		t.Fatalf("zero probe: %q, %q, %q; want chat on m1, a model's breaker on its model", c.ProbeKind(), c.ProbeModelFor(""), c.ProbeModelFor("m2"))
	}
	c.Probe, c.ProbeModel = ProbeModels, "cheap"
	if c.ProbeKind() != ProbeModels || c.ProbeModelFor("") != "cheap" || c.ProbeModelFor("m2") != "m2" {
		t.Fatalf("set probe: %q, %q, %q", c.ProbeKind(), c.ProbeModelFor(""), c.ProbeModelFor("m2"))
	}
}
