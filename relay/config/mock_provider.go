package config

import "github.com/relaydev/relay/relay/provider"

// AsProvider is the fake upstream as the provider "mock" that `relay dev`
// serves when no providers are configured. It is called over h2c: the fake
// upstream ships with the relay and speaks it, and the worker's streams
// then share a few connections instead of holding one each.
func (m MockUpstream) AsProvider(baseURL string) provider.Config {
	return provider.Config{
		Name:                "mock",
		BaseURL:             baseURL,
		APIKeys:             m.APIKeys,
		Models:              m.ServedModels(),
		HTTP2PriorKnowledge: true,
	}
}
