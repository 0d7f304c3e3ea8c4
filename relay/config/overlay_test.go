package config

import (
	"strings"
	"testing"
)

// An overlay (a second --config) replaces the keys it sets, a list whole,
// and leaves the others to the file before it; an unknown key in it is
// refused like one in the first file. This is how a Kubernetes Secret
// holds the edge's api_keys beside the ConfigMap's configuration.
func TestOverlaysMergeOverTheFile(t *testing.T) {
	base := writeFile(t, `
edge:
  listen: 127.0.0.1:1000
  keepalive: 5s
  api_keys:
    - {tenant: old, key_sha256: 0000000000000000000000000000000000000000000000000000000000000000}
`)
	secret := writeFile(t, `
edge:
  resume_token_secret: 0123456789abcdef0123456789abcdef
  api_keys:
    - {tenant: acme, key_sha256: 35c05c9bf65f39ee701ad5eaaeb265e8064907d82c36ebfd335998150ed8b8dc}
    - {tenant: beta, key_sha256: 8f60ea75cd528774c235d2a5beece3b82fed212d171e262bb19cbb89850256bb}
`)
	cfg, err := Load(Sources{File: base, Overlays: []string{secret}}, RoleDev)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Edge.Listen != "127.0.0.1:1000" || cfg.Edge.Keepalive.String() != "5s" {
		t.Errorf("listen %q, keepalive %v: the first file's keys were lost", cfg.Edge.Listen, cfg.Edge.Keepalive)
	}
	if len(cfg.Edge.APIKeys) != 2 || cfg.Edge.APIKeys[0].Tenant != "acme" {
		t.Errorf("api_keys = %+v, want the overlay's two", cfg.Edge.APIKeys)
	}
	bad := writeFile(t, "edge:\n  api_kyes: []\n")
	if _, err := Load(Sources{File: base, Overlays: []string{bad}}, RoleDev); err == nil || !strings.Contains(err.Error(), "edge.api_kyes") {
		t.Errorf("unknown key in an overlay: %v", err)
	}
}
