package config

import (
	"strings"
	"testing"
	"time"

	"github.com/relaydev/relay/relay/backoff"
	"github.com/relaydev/relay/relay/provider"
)

func TestLoadsResilienceSettings(t *testing.T) {
	file := writeFile(t, `
providers:
  - name: primary
    base_url: http://127.0.0.1:9/v1
    api_keys_file: /run/secrets/primary-keys
    models: [big, small]
    backup_providers: [backup]
    retry: {base: 100ms, cap: 2s, max_retries: 4}
    first_token_timeout: 10s
    stall_timeout: 5s
    continuation: prompt
    continue_prompt: Go on.
  - name: backup
    type: anthropic
    base_url: http://127.0.0.1:10/v1
    api_keys: [k1, k2]
    models: [big]
models:
  - name: big
    fallbacks:
      - model: small
      - {model: big, provider: backup}
    max_retries_per_model: 2
    continuation: prefill
    price: {input_per_mtok: 2.5, output_per_mtok: 10}
    cache: {mode: fallback, ttl: 36h, tenants: [acme]}
worker:
  keys_poll_interval: 250ms
`)
	cfg, err := Load(Sources{File: file}, RoleWorker)
	if err != nil {
		t.Fatal(err)
	}
	p := cfg.Providers[0]
	if p.APIKeysFile != "/run/secrets/primary-keys" || p.Retry != (backoff.Config{Base: 100 * time.Millisecond, Cap: 2 * time.Second, MaxRetries: 4}) ||
		p.FirstTokenTimeout != 10*time.Second || p.StallTimeout != 5*time.Second || p.Continuation != provider.Prompt ||
		p.ContinuePrompt != "Go on." || len(p.BackupProviders) != 1 {
		t.Fatalf("provider = %+v", p)
	}
	if cfg.Providers[1].Type != provider.TypeAnthropic {
		t.Fatalf("providers[1].type = %q, want anthropic", cfg.Providers[1].Type)
	}
	if cfg.Worker.KeysPollInterval != 250*time.Millisecond {
		t.Fatalf("worker.keys_poll_interval = %v", cfg.Worker.KeysPollInterval)
	}
	cat, err := cfg.Catalog()
	if err != nil {
		t.Fatal(err)
	}
	var steps []string
	for _, c := range cat.Route("big") {
		steps = append(steps, c.Provider.Name+"/"+c.Model)
	}
	if got := strings.Join(steps, " "); got != "primary/big backup/big primary/small" {
		t.Fatalf("route of big = %s", got)
	}
	if big, _ := cat.ModelSettings("big"); big.Cache.Mode != provider.CacheFallback || big.Cache.TTL != 36*time.Hour ||
		!big.Cache.For("acme") || big.Cache.For("beta") {
		t.Fatalf("cache of big = %+v", big.Cache)
	}
	big := cat.Route("big")[0]
	if big.MaxRetries != 2 || big.Continuation != provider.Prefill || big.Price != (provider.Price{InputPerMTok: 2.5, OutputPerMTok: 10}) {
		t.Fatalf("big on primary = %+v", big)
	}
}

func TestRejectsBadModelsNamingTheKey(t *testing.T) {
	providers := "providers:\n  - name: p\n    base_url: http://127.0.0.1:9/v1\n    models: [m]\n"
	for _, tc := range []struct{ name, yaml, want string }{
		{"fallback not served", providers + "models:\n  - name: m\n    fallbacks: [{model: x}]\n", "models[0].fallbacks[0].model"},
		{"unknown key in a model", providers + "models:\n  - name: m\n    prices: {}\n", "prices"},
		{"bad retry", "providers:\n  - name: p\n    base_url: http://127.0.0.1:9/v1\n    models: [m]\n    retry: {base: 2s, cap: 1s}\n", "providers[0].retry.cap"},
		{"unknown backup", "providers:\n  - name: p\n    base_url: http://127.0.0.1:9/v1\n    models: [m]\n    backup_providers: [q]\n", "providers[0].backup_providers[0]"},
		{"bad cache mode", providers + "models:\n  - name: m\n    cache: {mode: always}\n", "models[0].cache.mode"},
		{"unknown type", "providers:\n  - name: p\n    type: gemini\n    base_url: http://127.0.0.1:9/v1\n    models: [m]\n", "providers[0].type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(Sources{File: writeFile(t, tc.yaml)}, RoleWorker)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to name %q", err, tc.want)
			}
		})
	}
}

// relay dev without providers serves the fake upstream, so models may
// refer to its models.
func TestDevModelsMayReferToTheFakeUpstream(t *testing.T) {
	file := writeFile(t, "models:\n  - name: mock-1\n    fallbacks: [{model: mock-2}]\n")
	if _, err := Load(Sources{File: file}, RoleDev); err != nil {
		t.Fatal(err)
	}
}
