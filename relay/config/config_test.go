package config

import (
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// exampleRoles names the role each example in configs/ is written for.
var exampleRoles = map[string]Role{
	"dev.yaml":           RoleDev,
	"edge.yaml":          RoleEdge,
	"worker.yaml":        RoleWorker,
	"coordinator.yaml":   RoleCoordinator,
	"mock-upstream.yaml": RoleMockUpstream,
}

// ownCredentials is an overlay that replaces the example keys and secret
// of configs/edge.yaml with fresh ones, as a deployment's must.
func ownCredentials(t *testing.T) string {
	t.Helper()
	return writeFile(t, fmt.Sprintf("edge:\n  api_keys:\n    - {tenant: acme, key_sha256: %x}\n    - {tenant: beta, key_sha256: %x, models: [mock-1]}\n  resume_token_secret: %s\n",
		sha256.Sum256([]byte(rand.Text())), sha256.Sum256([]byte(rand.Text())), rand.Text()+rand.Text()))
}

// Every YAML file in configs/ loads for its role, and none is left out.
func TestExampleConfigsLoad(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "configs", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no configs: %v", err)
	}
	for _, f := range files {
		if _, ok := exampleRoles[filepath.Base(f)]; !ok {
			t.Errorf("%s has no role in exampleRoles; add it so it is loaded", f)
		}
	}
	for file, role := range exampleRoles {
		src := Sources{File: filepath.Join("..", "..", "configs", file)}
		if role == RoleEdge {
			// Its published example credentials are refused
			// (TestExampleCredentialsRefused): replaced, as a deployment must.
			src.Overlays = []string{ownCredentials(t)}
		}
		if _, err := Load(src, role); err != nil {
			t.Errorf("%s: %v", file, err)
		}
	}
}

func TestLayersOverrideInOrder(t *testing.T) {
	file := writeFile(t, `
edge:
  listen: 127.0.0.1:1000
  keepalive: 5s
worker:
  max_inflight: 3
providers:
  - name: p
    base_url: http://127.0.0.1:9/v1
    models: [m]
`)
	cfg, err := Load(Sources{
		File:    file,
		Environ: []string{"RELAY_EDGE__LISTEN=127.0.0.1:2000", "RELAY_WORKER__MAX_INFLIGHT=7", "OTHER=x"},
		Set:     []string{"edge.listen=127.0.0.1:3000"},
	}, RoleDev)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Edge.Listen != "127.0.0.1:3000" {
		t.Errorf("edge.listen = %q, want the --set value", cfg.Edge.Listen)
	}
	if cfg.Worker.MaxInflight != 7 {
		t.Errorf("worker.max_inflight = %d, want the environment's 7", cfg.Worker.MaxInflight)
	}
	if cfg.Edge.Keepalive != 5*time.Second {
		t.Errorf("edge.keepalive = %v, want the file's 5s", cfg.Edge.Keepalive)
	}
	if len(cfg.Providers) != 1 || cfg.Providers[0].Models[0] != "m" {
		t.Errorf("providers = %+v", cfg.Providers)
	}
}

func TestRejectsNamingTheKey(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		set        []string
		role       Role
		want       string
	}{
		{"unknown key", "edge:\n  lisen: x\n", nil, RoleDev, "edge.lisen"},
		{"embedded NATS beyond loopback", "embedded_nats:\n  listen: 0.0.0.0:4222\n", nil, RoleDev, "embedded_nats.listen"},
		{"unknown section", "edges:\n  listen: x\n", nil, RoleDev, "edges"},
		{"bad duration", "edge:\n  keepalive: soon\n", nil, RoleDev, "edge.keepalive"},
		{"bad number", "", []string{"worker.max_inflight=many"}, RoleDev, "worker.max_inflight"},
		{"invalid value", "", []string{"worker.max_inflight=-1"}, RoleDev, "worker.max_inflight"},
		{"bad log level", "log:\n  level: loud\n", nil, RoleDev, "log.level"},
		{"no providers for a worker", "", nil, RoleWorker, "providers"},
		{"bad provider url", "providers:\n  - name: p\n    base_url: nowhere\n    models: [m]\n", nil, RoleWorker, "providers[0].base_url"},
		{"h2c over https", "providers:\n  - name: p\n    base_url: https://api.example.com/v1\n    http2_prior_knowledge: true\n    models: [m]\n", nil, RoleWorker, "providers[0].http2_prior_knowledge"},
		{"h2c not a boolean", "providers:\n  - name: p\n    base_url: http://127.0.0.1:8000/v1\n    http2_prior_knowledge: sometimes\n    models: [m]\n", nil, RoleWorker, "http2_prior_knowledge"},
		{"bad set syntax", "", []string{"edge.listen"}, RoleDev, "--set"},
		{"worker id not its node", "providers:\n  - name: p\n    base_url: http://127.0.0.1:8000/v1\n    models: [m]\n", []string{"nats.node=w1", "worker.id=w2"}, RoleWorker, "worker.id"},
		{"bad setup credentials", "", []string{"setup_nats.token=t", "setup_nats.user=u"}, RoleSetup, "setup_nats"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := Sources{Set: tc.set}
			if tc.yaml != "" {
				src.File = writeFile(t, tc.yaml)
			}
			_, err := Load(src, tc.role)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to name %q", err, tc.want)
			}
		})
	}
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "relay.yaml")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestWorkerMetricsNameNoTenantsUnlessAsked: the tenants the edge and the
// coordinator are configured with do not become label values of the
// worker's metrics (an ops listener's scraper is not a tenant's operator);
// worker.tenants names the ones an operator asks for.
func TestWorkerMetricsNameNoTenantsUnlessAsked(t *testing.T) {
	body := `
edge:
  api_keys:
    - {tenant: beta, key_sha256: a1aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa}
    - {tenant: acme, key_sha256: a2aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa}
coordinator:
  tenant_limits: {gamma: 10}
`
	cfg, err := Load(Sources{File: writeFile(t, body)}, RoleDev)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Worker.Tenants) != 0 {
		t.Errorf("worker.tenants = %q, want none unless set", cfg.Worker.Tenants)
	}
	cfg, err = Load(Sources{File: writeFile(t, body), Set: []string{"worker.tenants=acme"}}, RoleDev)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(cfg.Worker.Tenants, ","); got != "acme" {
		t.Errorf("worker.tenants = %q, want the configured acme", got)
	}
}

func TestDevServesTheDemoUnlessTurnedOff(t *testing.T) {
	for _, tc := range []struct {
		role Role
		set  []string
		want bool
	}{
		{RoleDev, nil, true},
		{RoleDev, []string{"edge.demo=false"}, false},
		{RoleEdge, nil, false},
		{RoleEdge, []string{"edge.demo=true"}, true},
	} {
		set := append([]string{"edge.allow_anonymous=true"}, tc.set...)
		cfg, err := Load(Sources{Set: set, File: writeFile(t, "providers:\n  - {name: p, base_url: \"http://127.0.0.1:9/v1\", models: [m]}\nnats:\n  url: nats://127.0.0.1:4222\n")}, tc.role)
		if err != nil {
			t.Fatalf("%s %v: %v", tc.role, tc.set, err)
		}
		if cfg.Edge.Demo != tc.want {
			t.Errorf("%s %v: edge.demo = %v, want %v", tc.role, tc.set, cfg.Edge.Demo, tc.want)
		}
	}
}

// A duration written without a unit is refused from every layer, naming
// the key and the unit it lacks, instead of meaning nanoseconds; zero
// alone stays the default.
func TestDurationWithoutUnitIsRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		src  Sources
		key  string
	}{
		{"yaml", Sources{File: writeFile(t, "providers:\n  - {name: p, base_url: \"http://127.0.0.1:9/v1\", models: [m], stall_timeout: 15}\n")}, "providers[0].stall_timeout"},
		{"yaml float", Sources{File: writeFile(t, "edge:\n  keepalive: 1.5\n")}, "edge.keepalive"},
		{"environment", Sources{Environ: []string{"RELAY_EDGE__KEEPALIVE=15"}}, "edge.keepalive"},
		{"set", Sources{Set: []string{"worker.drain_timeout=15"}}, "worker.drain_timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(tc.src, RoleDev)
			if err == nil {
				t.Fatal("loaded; want a refusal")
			}
			for _, want := range []string{tc.key, "has no unit", `"15s"`} {
				if want == `"15s"` && tc.name == "yaml float" {
					want = `"1.5s"`
				}
				if !strings.Contains(err.Error(), want) {
					t.Errorf("err = %v, want it to say %s", err, want)
				}
			}
		})
	}
	cfg, err := Load(Sources{
		File:    writeFile(t, "edge:\n  keepalive: 0\n"),
		Environ: []string{"RELAY_WORKER__DRAIN_TIMEOUT=0"},
		Set:     []string{"edge.retry_hint=0", "coordinator.health_interval=2s"},
	}, RoleDev)
	if err != nil {
		t.Fatalf("zero without a unit: %v", err)
	}
	if cfg.Edge.Keepalive != 0 || cfg.Edge.RetryHint != 0 || cfg.Worker.DrainTimeout != 0 {
		t.Errorf("zeros decoded as %v, %v, %v", cfg.Edge.Keepalive, cfg.Edge.RetryHint, cfg.Worker.DrainTimeout)
	}
	if cfg.Coordinator.HealthInterval != 2*time.Second {
		t.Errorf("coordinator.health_interval = %v, want 2s", cfg.Coordinator.HealthInterval)
	}
}

// nats.url is refused at validation when a URL's scheme is not one the
// NATS client dials, naming the key, the URL and the schemes it takes.
func TestNATSURLSchemeIsChecked(t *testing.T) {
	const providers = "providers:\n  - {name: p, base_url: \"http://127.0.0.1:9/v1\", models: [m]}\n"
	for _, url := range []string{"http://127.0.0.1:8222", "nats://a:4222, https://b:4222", "HTTP://user:secret@c:4222"} {
		_, err := Load(Sources{File: writeFile(t, providers), Set: []string{"nats.url=" + url}}, RoleWorker)
		if err == nil {
			t.Errorf("nats.url=%s loaded; want a refusal", url)
			continue
		}
		for _, want := range []string{"nats.url", "is not one of nats, tls, ws, wss"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("nats.url=%s: err = %v, want it to say %q", url, err, want)
			}
		}
		if strings.Contains(err.Error(), "secret") {
			t.Errorf("err = %v shows the password", err)
		}
	}
	for _, url := range []string{"", "nats://a:4222", "tls://a:4222,wss://b:443", "WS://a:80", "127.0.0.1:4222"} {
		if _, err := Load(Sources{File: writeFile(t, providers), Set: []string{"nats.url=" + url}}, RoleWorker); err != nil {
			t.Errorf("nats.url=%q: %v", url, err)
		}
	}
}

// dev calls its fake upstream, which speaks h2c, over h2c; a real
// provider's calls keep their protocol unless configured.
func TestDevCallsTheFakeUpstreamOverH2C(t *testing.T) {
	p := MockUpstream{}.AsProvider("http://127.0.0.1:8081/v1")
	if err := p.Validate("mock"); err != nil || !p.HTTP2PriorKnowledge {
		t.Fatalf("fake upstream as a provider: h2c %v, %v", p.HTTP2PriorKnowledge, err)
	}
	file := writeFile(t, "providers:\n  - name: p\n    base_url: http://127.0.0.1:8000/v1\n    models: [m]\n")
	c, err := Load(Sources{File: file}, RoleWorker)
	if err != nil {
		t.Fatal(err)
	}
	if c.Providers[0].HTTP2PriorKnowledge {
		t.Fatal("a provider without http2_prior_knowledge is called over h2c")
	}
}

// relay setup needs no providers: it only sets up JetStream, with
// setup_nats's credentials (nats's url unless its own) or nats's.
func TestSetupNeedsOnlyNATS(t *testing.T) {
	cfg, err := Load(Sources{Set: []string{"nats.url=nats://n:4222", "nats.user=coordinator", "setup_nats.nkey_seed_file=/s.nk"}}, RoleSetup)
	if err != nil {
		t.Fatal(err)
	}
	if c := cfg.SetupConn(); c.URL != "nats://n:4222" || c.NKeySeed != "/s.nk" || c.User != "" {
		t.Fatalf("setup connects with %+v", c)
	}
	cfg.SetupNATS.NKeySeed = ""
	if c := cfg.SetupConn(); c.User != "coordinator" {
		t.Fatalf("without setup_nats credentials setup connects with %+v, want nats", c)
	}
}
