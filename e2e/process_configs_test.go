package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/relaydev/relay/relay/config"
)

// The example cluster of configs/cluster (run.sh, `make cluster`): every
// role's file loads for its role, with three replicas and the client URLs
// of all three nodes; each nats-server file is valid (nats-server -t); the
// script parses.
func TestProcessClusterConfigs(t *testing.T) {
	dir := filepath.Join("..", "configs", "cluster")
	roles := map[string]config.Role{
		"coordinator.yaml":   config.RoleCoordinator,
		"edge-1.yaml":        config.RoleEdge,
		"edge-2.yaml":        config.RoleEdge,
		"worker.yaml":        config.RoleWorker,
		"mock-upstream.yaml": config.RoleMockUpstream,
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no configs in %s: %v", dir, err)
	}
	for _, f := range files {
		if _, ok := roles[filepath.Base(f)]; !ok {
			t.Errorf("%s has no role here; add it so it is loaded", f)
		}
	}

	confs, err := filepath.Glob(filepath.Join(dir, "nats-*.conf"))
	if err != nil || len(confs) != 3 {
		t.Fatalf("want three nats-server files in %s, have %v (%v)", dir, confs, err)
	}
	bin := processBinaries(t).NATSServer
	listen := regexp.MustCompile(`(?m)^listen:\s*(\S+)`)
	var urls []string
	for _, c := range confs {
		if out, err := exec.Command(bin, "-t", "-c", c).CombinedOutput(); err != nil {
			t.Errorf("nats-server -t -c %s: %v\n%s", c, err, out)
		}
		b, err := os.ReadFile(c)
		must(t, err)
		m := listen.FindSubmatch(b)
		if m == nil {
			t.Fatalf("%s: no listen address", c)
		}
		urls = append(urls, "nats://"+string(m[1]))
	}

	for file, role := range roles {
		cfg, err := config.Load(config.Sources{File: filepath.Join(dir, file)}, role)
		if err != nil {
			t.Errorf("%s: %v", file, err)
			continue
		}
		if role == config.RoleMockUpstream {
			continue
		}
		if cfg.Streams.Replicas != 3 {
			t.Errorf("%s: streams.replicas %d, want 3", file, cfg.Streams.Replicas)
		}
		for _, u := range urls {
			if !strings.Contains(cfg.NATS.URL, u) {
				t.Errorf("%s: nats.url %q lacks %s", file, cfg.NATS.URL, u)
			}
		}
	}

	if out, err := exec.Command("bash", "-n", filepath.Join(dir, "run.sh")).CombinedOutput(); err != nil {
		t.Errorf("bash -n run.sh: %v\n%s", err, out)
	}
}
