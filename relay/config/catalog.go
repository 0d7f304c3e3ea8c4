package config

import "github.com/relaydev/relay/relay/provider"

// Catalog builds the provider catalog of the providers and models
// sections, validating both.
func (c Config) Catalog() (*provider.Catalog, error) {
	return provider.NewCatalog(c.Providers, c.Models...)
}
