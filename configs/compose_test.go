package configs_test

import (
	"bytes"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"go.yaml.in/yaml/v3"

	"github.com/relaydev/relay/relay/config"
)

const composeDir = "compose"

// composeFile is the part of the Compose specification compose.yaml
// uses; decoding with KnownFields refuses anything else, so a typo
// (depends_om) fails here instead of being ignored by a reader.
type composeFile struct {
	Name     string                    `yaml:"name"`
	XRelay   composeService            `yaml:"x-relay"`
	XNATS    composeService            `yaml:"x-nats"`
	Services map[string]composeService `yaml:"services"`
	Volumes  map[string]struct{}       `yaml:"volumes"`
}

type composeService struct {
	Image string `yaml:"image"`
	Build *struct {
		Context    string `yaml:"context"`
		Dockerfile string `yaml:"dockerfile"`
	} `yaml:"build"`
	Restart         string   `yaml:"restart"`
	Command         []string `yaml:"command"`
	Volumes         []string `yaml:"volumes"`
	Ports           []string `yaml:"ports"`
	DependsOn       []string `yaml:"depends_on"`
	StopGracePeriod string   `yaml:"stop_grace_period"`
}

// TestComposeFile decodes configs/compose/compose.yaml strictly and
// checks it against the repository: the relay image builds from the
// Dockerfile; every mounted file exists; each relay service runs a real
// role with a configuration that loads for it and reaches the cluster's
// nats services and the fake provider; stop_grace_period covers the
// workers' drain; the three nats-servers run go.mod's version with a
// configuration nats-server accepts (JetStream, routes to each other);
// nginx serves configs/nginx/relay.conf with both edges as upstreams.
func TestComposeFile(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(composeDir, "compose.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cf composeFile
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&cf); err != nil {
		t.Fatalf("compose.yaml: %v", err)
	}
	if b := cf.XRelay.Build; b == nil || !exists(t, filepath.Join(composeDir, b.Context, b.Dockerfile)) {
		t.Errorf("the relay image's build %+v names no Dockerfile", cf.XRelay.Build)
	}

	byRole := map[config.Role][]string{}
	natsServices := map[string]bool{}
	for name, s := range cf.Services {
		for _, dep := range s.DependsOn {
			if _, ok := cf.Services[dep]; !ok {
				t.Errorf("%s depends on %s, which is no service", name, dep)
			}
		}
		files := mounts(t, cf, name, s)
		switch s.Image {
		case cf.XRelay.Image:
			role, cfg := loadComposeConfig(t, name, s, files)
			byRole[role] = append(byRole[role], name)
			checkComposeRole(t, cf, name, s, role, cfg)
		case cf.XNATS.Image:
			natsServices[name] = true
			checkComposeNATS(t, cf, name, s, files)
		}
	}
	for role, n := range map[config.Role]int{config.RoleEdge: 2, config.RoleWorker: 2, config.RoleCoordinator: 1, config.RoleMockUpstream: 1} {
		if len(byRole[role]) != n {
			t.Errorf("%d %s services %v, want %d", len(byRole[role]), role, byRole[role], n)
		}
	}
	if len(natsServices) != 3 {
		t.Errorf("%d nats services, want a three-node cluster", len(natsServices))
	}
	checkComposeNginx(t, cf, byRole[config.RoleEdge])
}

// mounts maps each container path of s's bind mounts to the repository
// file or directory behind it; a named volume must be declared.
func mounts(t *testing.T, cf composeFile, name string, s composeService) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, v := range s.Volumes {
		parts := strings.Split(v, ":")
		if len(parts) < 2 {
			t.Fatalf("%s: volume %q", name, v)
		}
		if !strings.HasPrefix(parts[0], ".") {
			if _, ok := cf.Volumes[parts[0]]; !ok {
				t.Errorf("%s: named volume %q is not declared", name, parts[0])
			}
			continue
		}
		host := filepath.Join(composeDir, parts[0])
		if !exists(t, host) {
			t.Errorf("%s: mounts %s, which is not in the repository", name, host)
		}
		out[parts[1]] = host
	}
	return out
}

// resolve is the repository file behind the container path p.
func resolve(files map[string]string, p string) (string, bool) {
	for dst, host := range files {
		if rel, err := filepath.Rel(dst, p); err == nil && !strings.HasPrefix(rel, "..") {
			return filepath.Join(host, rel), true
		}
	}
	return "", false
}

// loadComposeConfig loads a relay service's configuration (`<role>
// --config <path>`) with the relay's loader, from the repository file
// mounted at that path.
func loadComposeConfig(t *testing.T, name string, s composeService, files map[string]string) (config.Role, config.Config) {
	t.Helper()
	if len(s.Command) != 3 || s.Command[1] != "--config" {
		t.Fatalf("%s: command %q, want <role> --config <file>", name, s.Command)
	}
	host, ok := resolve(files, s.Command[2])
	if !ok || !exists(t, host) {
		t.Fatalf("%s: --config %s is not a mounted repository file", name, s.Command[2])
	}
	role := config.Role(s.Command[0])
	cfg, err := config.Load(config.Sources{File: host}, role)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return role, cfg
}

// checkComposeRole checks where a relay service's configuration points:
// NATS at the nats services, providers at the fake provider's address,
// and a stop grace period that covers a worker's drain.
func checkComposeRole(t *testing.T, cf composeFile, name string, s composeService, role config.Role, cfg config.Config) {
	t.Helper()
	if role == config.RoleMockUpstream {
		return
	}
	for _, u := range strings.Split(cfg.NATS.URL, ",") {
		pu, err := url.Parse(u)
		if err != nil || cf.Services[pu.Hostname()].Image != cf.XNATS.Image || pu.Port() != "4222" {
			t.Errorf("%s: nats.url %s is not a nats service", name, u)
		}
	}
	for _, p := range cfg.Providers {
		pu, err := url.Parse(p.BaseURL)
		if err != nil || pu.Host != "mock-upstream:8081" {
			t.Errorf("%s: provider %s at %s, want the mock-upstream service", name, p.Name, p.BaseURL)
		}
	}
	grace, err := time.ParseDuration(s.StopGracePeriod)
	if err != nil || grace <= cfg.Worker.DrainTimeout {
		t.Errorf("%s: stop_grace_period %q does not cover drain_timeout %v", name, s.StopGracePeriod, cfg.Worker.DrainTimeout)
	}
	if role == config.RoleEdge {
		if _, port, _ := net.SplitHostPort(cfg.Edge.Listen); port != "8080" {
			t.Errorf("%s: listens on %s; nginx sends to port 8080", name, cfg.Edge.Listen)
		}
	}
}

// checkComposeNATS checks a nats service: go.mod's nats-server version,
// its name, and a configuration nats-server itself accepts, with
// JetStream and a route to every nats service.
func checkComposeNATS(t *testing.T, cf composeFile, name string, s composeService, files map[string]string) {
	t.Helper()
	gomod, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	v := regexp.MustCompile(`github.com/nats-io/nats-server/v2 v(\S+)`).FindSubmatch(gomod)
	if v == nil || s.Image != "nats:"+string(v[1]) {
		t.Errorf("%s: image %s, want nats:<go.mod's nats-server version>", name, s.Image)
	}
	i := slices.Index(s.Command, "--config")
	if i < 0 || i+1 >= len(s.Command) || !slices.Contains(s.Command, "--name") || s.Command[slices.Index(s.Command, "--name")+1] != name {
		t.Fatalf("%s: command %q, want --config <file> --name %s", name, s.Command, name)
	}
	host, ok := resolve(files, s.Command[i+1])
	if !ok {
		t.Fatalf("%s: %s is not mounted", name, s.Command[i+1])
	}
	opts, err := server.ProcessConfigFile(host)
	if err != nil {
		t.Fatalf("%s: %v", host, err)
	}
	if !opts.JetStream || opts.Cluster.Name == "" || len(opts.Routes) != 3 {
		t.Errorf("%s: jetstream %v, cluster %q, %d routes", host, opts.JetStream, opts.Cluster.Name, len(opts.Routes))
	}
	for _, r := range opts.Routes {
		if cf.Services[r.Hostname()].Image != cf.XNATS.Image {
			t.Errorf("%s: route to %s, which is no nats service", host, r)
		}
	}
}

// checkComposeNginx applies the nginx service's substitution to
// configs/nginx/relay.conf, as its command does, and checks that every
// edge, and nothing else, is an upstream.
func checkComposeNginx(t *testing.T, cf composeFile, edges []string) {
	t.Helper()
	s := cf.Services["nginx"]
	sed := regexp.MustCompile(`sed -e 's/([^/]+)/([^/]+)/'`).FindStringSubmatch(strings.Join(s.Command, " "))
	if sed == nil {
		t.Fatalf("nginx: command %q has no substitution of the upstream servers", s.Command)
	}
	host, ok := resolve(mounts(t, cf, "nginx", s), "/etc/relay-nginx/relay.conf")
	if !ok {
		t.Fatal("nginx: configs/nginx/relay.conf is not mounted")
	}
	conf, err := os.ReadFile(host)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(conf), sed[1]) {
		t.Fatalf("%s has no %q to replace", host, sed[1])
	}
	out := strings.ReplaceAll(string(conf), sed[1], sed[2])
	got := regexp.MustCompile(`server ([\w.-]+):8080;`).FindAllStringSubmatch(out, -1)
	var upstreams []string
	for _, g := range got {
		upstreams = append(upstreams, g[1])
	}
	slices.Sort(upstreams)
	if !slices.Equal(upstreams, slices.Sorted(slices.Values(edges))) {
		t.Errorf("nginx upstreams %v, want the edges %v", upstreams, edges)
	}
}

func exists(t *testing.T, p string) bool {
	t.Helper()
	_, err := os.Stat(p)
	return err == nil
}
