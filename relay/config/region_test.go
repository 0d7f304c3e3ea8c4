package config

import (
	"path/filepath"
	"strings"
	"testing"
)

// Every example in configs/regions/ loads for the roles it is written for.
func TestRegionConfigsLoad(t *testing.T) {
	roles := map[string][]Role{
		"region-a.yaml": {RoleEdge, RoleWorker, RoleCoordinator},
		"region-b.yaml": {RoleEdge, RoleWorker, RoleCoordinator},
		"dev-a.yaml":    {RoleDev},
		"dev-b.yaml":    {RoleDev},
	}
	files, err := filepath.Glob(filepath.Join("..", "..", "configs", "regions", "*.yaml"))
	if err != nil || len(files) != len(roles) {
		t.Fatalf("configs/regions has %d YAML files, the test knows %d: %v", len(files), len(roles), err)
	}
	for _, f := range files {
		for _, role := range roles[filepath.Base(f)] {
			cfg, err := Load(Sources{File: f}, role)
			if err != nil {
				t.Errorf("%s as %s: %v", f, role, err)
				continue
			}
			if !cfg.Region.Enabled() {
				t.Errorf("%s: no region", f)
			}
		}
	}
	b, err := Load(Sources{File: filepath.Join("..", "..", "configs", "regions", "dev-b.yaml")}, RoleDev)
	if err != nil {
		t.Fatal(err)
	}
	if b.Region.IsHome() || b.EmbeddedNATS.Domain != "b" || len(b.EmbeddedNATS.Leaf.Remotes) != 1 {
		t.Errorf("dev-b.yaml: region %+v, embedded %+v", b.Region, b.EmbeddedNATS)
	}
}

func TestRegionRejectsNamingTheKey(t *testing.T) {
	for _, tc := range []struct{ name, yaml, want string }{
		{"home without name", "region:\n  home_domain: a\n", "region.name"},
		{"bad domain", "region:\n  name: b\n  home_domain: a.b\n", "region.home_domain"},
		{"embedded domain differs", "region:\n  name: b\nembedded_nats:\n  domain: c\n", "embedded_nats.domain"},
		{"leaf without region", "embedded_nats:\n  domain: b\n  leaf:\n    remotes: [nats-leaf://127.0.0.1:7422]\n", "region.name"},
		{"leaf without domain", "region:\n  name: b\nembedded_nats:\n  leaf:\n    listen: 127.0.0.1:7422\n", "embedded_nats.domain"},
		{"unknown region key", "region:\n  nam: b\n", "region.nam"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(Sources{File: writeFile(t, tc.yaml)}, RoleDev)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to name %q", err, tc.want)
			}
		})
	}
}
