// Package provider describes the upstream LLM providers a relay can call
// and which of them serve which model. Any OpenAI-compatible endpoint is a
// provider; nothing here is tied to one vendor.
package provider

import (
	"fmt"
	"net/url"
	"regexp"
)

// Config is one provider, an element of the top-level `providers` list.
type Config struct {
	// Name identifies the provider in logs, metrics and fallback lists.
	Name string `koanf:"name"`
	// BaseURL is the OpenAI-compatible API root, e.g.
	// "https://api.example.com/v1"; the relay appends "/chat/completions".
	BaseURL string `koanf:"base_url"`
	// APIKeys are tried in order; a key the provider rejects is skipped.
	APIKeys []string `koanf:"api_keys"`
	// Models this provider serves, by the name clients use.
	Models []string `koanf:"models"`
}

var namePattern = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// Validate names the first invalid field, with key the config path of the
// provider (e.g. "providers[0]").
func (c Config) Validate(key string) error {
	if !namePattern.MatchString(c.Name) {
		return fmt.Errorf("%s.name: %q must be 1-64 letters, digits, '-' or '_'", key, c.Name)
	}
	u, err := url.Parse(c.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%s.base_url: %q is not an http(s) URL", key, c.BaseURL)
	}
	if len(c.Models) == 0 {
		return fmt.Errorf("%s.models: at least one model required", key)
	}
	for i, m := range c.Models {
		if m == "" {
			return fmt.Errorf("%s.models[%d]: empty model name", key, i)
		}
	}
	return nil
}

// Catalog answers which providers serve a model.
type Catalog struct {
	providers []Config
	byModel   map[string][]int
	models    []string
}

// NewCatalog validates the providers and indexes them by model.
func NewCatalog(providers []Config) (*Catalog, error) {
	c := &Catalog{providers: providers, byModel: map[string][]int{}}
	names := map[string]bool{}
	for i, p := range providers {
		key := fmt.Sprintf("providers[%d]", i)
		if err := p.Validate(key); err != nil {
			return nil, err
		}
		if names[p.Name] {
			return nil, fmt.Errorf("%s.name: %q is used twice", key, p.Name)
		}
		names[p.Name] = true
		for _, m := range p.Models {
			if _, seen := c.byModel[m]; !seen {
				c.models = append(c.models, m)
			}
			c.byModel[m] = append(c.byModel[m], i)
		}
	}
	return c, nil
}

// Models lists every served model once, in configuration order.
func (c *Catalog) Models() []string { return c.models }

// Serves reports whether some provider serves model.
func (c *Catalog) Serves(model string) bool { return len(c.byModel[model]) > 0 }

// For returns the providers that serve model, in configuration order.
func (c *Catalog) For(model string) []Config {
	var out []Config
	for _, i := range c.byModel[model] {
		out = append(out, c.providers[i])
	}
	return out
}

// Providers returns every provider in configuration order.
func (c *Catalog) Providers() []Config { return c.providers }
