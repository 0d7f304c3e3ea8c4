package config

import "github.com/relaydev/relay/relay/provider"

// AsProvider is the fake upstream as the provider "mock" that `relay dev`
// serves when no providers are configured.
func (m MockUpstream) AsProvider(baseURL string) provider.Config {
	return provider.Config{
		Name:    "mock",
		BaseURL: baseURL,
		APIKeys: m.APIKeys,
		Models:  m.ServedModels(),
	}
}
