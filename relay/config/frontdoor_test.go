package config

import (
	"strings"
	"testing"
	"time"
)

const providersYAML = `
providers:
  - name: p
    base_url: http://127.0.0.1:9/v1
    models: [m, n]
`

func TestFrontDoorNeedsKeysOutsideDev(t *testing.T) {
	const keys = `
edge:
  api_keys:
    - tenant: acme
      key_sha256: 4c5dc9b7708905f77f5e5d16316b5dfb425e68cb326dcd55a860e90a7707031e
      models: [m]
    - {tenant: beta, key_sha256: 2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824}
`
	for _, tc := range []struct {
		name, yaml string
		role       Role
		want       string // "" for success
	}{
		{"edge without keys", providersYAML, RoleEdge, "edge.api_keys"},
		{"edge anonymous", providersYAML + "edge:\n  allow_anonymous: true\n", RoleEdge, ""},
		{"edge with keys, no secret", providersYAML + keys, RoleEdge, "edge.resume_token_secret"},
		{"edge with keys and secret", providersYAML + keys + "  resume_token_secret: 0123456789abcdef0123456789abcdef\n", RoleEdge, ""},
		{"dev without keys", "", RoleDev, ""},
		{"dev with keys, no secret", providersYAML + keys, RoleDev, ""},
		{"a worker needs no keys", providersYAML, RoleWorker, ""},
		{"window beyond retention", providersYAML + "streams:\n  retention: 1h\nedge:\n  allow_anonymous: true\n  idempotency_window: 2h\n", RoleEdge, "edge.idempotency_window"},
		{"default window, short retention", providersYAML + "streams:\n  retention: 1h\nedge:\n  allow_anonymous: true\n", RoleEdge, ""},
		{"token TTL beyond retention", providersYAML + "streams:\n  retention: 1h\nedge:\n  allow_anonymous: true\n  resume_token_ttl: 2h\n", RoleEdge,
			"edge.resume_token_ttl: 2h0m0s is longer than streams.retention (1h0m0s)"},
		{"token TTL beyond a day", providersYAML + "streams:\n  retention: 72h\nedge:\n  allow_anonymous: true\n  resume_token_ttl: 87600h\n", RoleEdge,
			"edge.resume_token_ttl: 87600h0m0s is longer than the maximum, 24h0m0s"},
		{"token TTL of a day", providersYAML + "edge:\n  allow_anonymous: true\n  resume_token_ttl: 24h\n", RoleEdge, ""},
		{"bad key hash", providersYAML + "edge:\n  api_keys: [{tenant: a, key_sha256: sk-live-oops}]\n", RoleDev, "edge.api_keys[0].key_sha256"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := Sources{}
			if tc.yaml != "" {
				src.File = writeFile(t, tc.yaml)
			}
			cfg, err := Load(src, tc.role)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to name %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "sk-live-oops") {
				t.Fatalf("the error repeats a secret-looking value: %v", err)
			}
			_ = cfg
		})
	}
	cfg, err := Load(Sources{File: writeFile(t, providersYAML+keys+"  resume_token_secret: 0123456789abcdef0123456789abcdef\n  resume_token_ttl: 10m\n  cors_allowed_origins: [https://app.example]\n"),
		Environ: []string{"RELAY_EDGE__MAX_TOKENS_CAP=100", "RELAY_EDGE__CORS_ALLOWED_ORIGINS=https://a.example,https://b.example"}}, RoleEdge)
	if err != nil {
		t.Fatal(err)
	}
	e := cfg.Edge
	if len(e.APIKeys) != 2 || e.APIKeys[0].Tenant != "acme" || len(e.APIKeys[0].Models) != 1 || e.APIKeys[1].Tenant != "beta" ||
		e.ResumeTokenTTL != 10*time.Minute || e.MaxTokensCap != 100 || len(e.CORSAllowedOrigins) != 2 {
		t.Fatalf("edge config %+v", e)
	}
}
