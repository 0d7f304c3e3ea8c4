package provider

import (
	"cmp"
	"fmt"
	"slices"
)

// Catalog answers which providers serve a model, and which route a request
// for a model takes through them.
type Catalog struct {
	providers []Config
	byName    map[string]Config
	byModel   map[string][]int
	models    []string
	settings  map[string]Model
	// routes holds each served model's route, worked out once: a worker
	// asks for one with every request.
	routes map[string][]Candidate
}

// NewCatalog validates the providers and the entries of the `models`
// section, which are optional, and indexes them.
func NewCatalog(providers []Config, models ...Model) (*Catalog, error) {
	c := &Catalog{providers: providers, byName: map[string]Config{}, byModel: map[string][]int{}, settings: map[string]Model{}}
	for i, p := range providers {
		key := fmt.Sprintf("providers[%d]", i)
		if err := p.Validate(key); err != nil {
			return nil, err
		}
		if _, dup := c.byName[p.Name]; dup {
			return nil, fmt.Errorf("%s.name: %q is used twice", key, p.Name)
		}
		c.byName[p.Name] = p
		for _, m := range p.Models {
			if _, seen := c.byModel[m]; !seen {
				c.models = append(c.models, m)
			}
			c.byModel[m] = append(c.byModel[m], i)
		}
	}
	for i, p := range providers {
		if err := c.validateBackups(fmt.Sprintf("providers[%d].backup_providers", i), p); err != nil {
			return nil, err
		}
	}
	for i, m := range models {
		key := fmt.Sprintf("models[%d]", i)
		if err := m.validate(key, c.byName, c.Serves); err != nil {
			return nil, err
		}
		if _, dup := c.settings[m.Name]; dup {
			return nil, fmt.Errorf("%s.name: %q has two entries", key, m.Name)
		}
		c.settings[m.Name] = m
	}
	c.routes = map[string][]Candidate{}
	for _, m := range c.models {
		r := c.route(m)
		c.routes[m] = r[:len(r):len(r)]
	}
	return c, nil
}

// validateBackups checks that every backup of p is another provider, named
// once, that serves at least one of p's models: a backup that serves none
// would never be tried.
func (c *Catalog) validateBackups(key string, p Config) error {
	for i, name := range p.BackupProviders {
		b, ok := c.byName[name]
		switch {
		case !ok:
			return fmt.Errorf("%s[%d]: no provider is named %q", key, i, name)
		case name == p.Name:
			return fmt.Errorf("%s[%d]: %q is the provider itself", key, i, name)
		case slices.Index(p.BackupProviders, name) < i:
			return fmt.Errorf("%s[%d]: %q is listed twice", key, i, name)
		case !slices.ContainsFunc(p.Models, b.Serves):
			return fmt.Errorf("%s[%d]: %q serves none of %s's models", key, i, name, p.Name)
		}
	}
	return nil
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

// Candidate is one step of a route: a model on a provider, with the
// settings that apply to calls of it.
type Candidate struct {
	Provider Config
	// Model is the model name sent to the provider.
	Model string
	// MaxRetries is the model's max_retries_per_model, resolved: how many
	// retries a request makes on this candidate before moving on.
	MaxRetries int
	// Continuation is the mode resolved from the model, then the provider,
	// then Prefill; always Prompt on a provider that cannot prefill.
	Continuation Continuation
	// ContinuePrompt is the prompt-mode message resolved the same way.
	ContinuePrompt string
	// Price is the model's price.
	Price Price
	// ContextWindow is the model's context_window, 0 if unknown.
	ContextWindow int
}

// Route returns the candidates a request for model tries, in order; nil
// when no provider serves model. The route is:
//
//  1. every provider that serves model, in configuration order, each
//     followed by those of its backup_providers that serve model too;
//  2. then, for each of the model's fallbacks in order, the same for the
//     fallback's model, or only the fallback's provider when it names one.
//
// A provider and model pair appears once, where it first would.
//
// The route of a served model is the catalog's own, the same slice for
// every request: read it, never write it (an append copies it, as its
// capacity is its length). A candidate is 470 bytes, most of it its
// provider's settings: a route copied for each request was one of the
// larger items of a worker's memory per generation.
func (c *Catalog) Route(model string) []Candidate {
	if r, ok := c.routes[model]; ok {
		return r
	}
	return c.route(model)
}

// route works out Route's answer for model.
func (c *Catalog) route(model string) []Candidate {
	var out []Candidate
	add := func(p Config, m string) {
		if !slices.ContainsFunc(out, func(x Candidate) bool { return x.Provider.Name == p.Name && x.Model == m }) {
			out = append(out, c.candidate(p, m))
		}
	}
	step := func(m, only string) {
		for _, i := range c.byModel[m] {
			p := c.providers[i]
			switch {
			case only == "":
				add(p, m)
				for _, name := range p.BackupProviders {
					if b := c.byName[name]; b.Serves(m) {
						add(b, m)
					}
				}
			case p.Name == only:
				add(p, m)
			}
		}
	}
	step(model, "")
	for _, f := range c.settings[model].Fallbacks {
		step(f.Model, f.Provider)
	}
	return out
}

// candidate resolves the settings of model m on provider p.
func (c *Catalog) candidate(p Config, m string) Candidate {
	s := c.settings[m]
	return Candidate{
		Provider:       p,
		Model:          m,
		MaxRetries:     s.retriesPerModel(),
		Continuation:   p.continuation(s.Continuation),
		ContinuePrompt: cmp.Or(s.ContinuePrompt, p.ContinuePrompt, DefaultContinuePrompt),
		Price:          s.Price,
		ContextWindow:  s.ContextWindow,
	}
}

// continuation is the mode of a model whose own is model: the model's,
// else the provider's, else Prefill; Prompt on a provider that cannot
// prefill.
func (c Config) continuation(model Continuation) Continuation {
	if !c.Type.prefills() {
		return Prompt
	}
	return cmp.Or(model, c.Continuation, Prefill)
}

// Provider returns the provider named name.
func (c *Catalog) Provider(name string) (Config, bool) {
	p, ok := c.byName[name]
	return p, ok
}

// ModelSettings returns the `models` entry of model, if it has one.
func (c *Catalog) ModelSettings(model string) (Model, bool) {
	m, ok := c.settings[model]
	return m, ok
}
