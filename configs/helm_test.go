package configs_test

import (
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/relaydev/relay/relay/config"
	"github.com/relaydev/relay/relay/ociimage"
)

const ciValues = chartDir + "/ci/test-values.yaml"

var roles = []string{"edge", "worker", "coordinator"}

// TestHelmChart lints the chart and renders it with every optional part
// on (ci/test-values.yaml), then holds what it renders to the relay:
// every role's configuration loads through the relay's own loader from
// the files and environment its pod would get, listens where the probes
// (/healthz, /readyz) and Services point and its ops listener nowhere
// but on loopback or, scraped, the pod's IP (checkListeners), reaches the official NATS
// chart's service, reads provider keys and the edge's key hashes from
// the Secret, runs as the image's user, and is given a grace period that
// covers the worker's drain; each role has a PodDisruptionBudget, the
// workers an HPA, and the ServiceMonitor scrapes every role.
func TestHelmChart(t *testing.T) {
	lintChart(t, ciValues, nil)
	r := renderChart(t, ciValues, nil)
	if len(r.deployments) != len(roles) {
		t.Errorf("%d Deployments, want one per role", len(r.deployments))
	}
	for _, role := range roles {
		t.Run(role, func(t *testing.T) { checkRole(t, r, role) })
	}

	hpa, ok := r.hpas["relay-worker"]
	if !ok || hpa.Spec.ScaleTargetRef.Kind != "Deployment" || hpa.Spec.ScaleTargetRef.Name != "relay-worker" {
		t.Fatalf("HPA of the workers: %+v", hpa)
	}
	if r.deployments["relay-worker"].Spec.Replicas != nil {
		t.Error("the worker Deployment sets replicas beside its HPA; each rollout would reset the HPA's count")
	}

	edge := r.services["relay-edge"]
	if edge == nil || !selects(edge.Spec.Selector, r.deployments["relay-edge"]) || edge.Spec.Ports[0].TargetPort.String() != "http" {
		t.Errorf("edge Service: %+v", edge)
	}
	sm, ok := r.serviceMonitors["relay"]
	if !ok || len(sm.Spec.Endpoints) != 1 || sm.Spec.Endpoints[0].Path != "/metrics" || sm.Spec.Endpoints[0].Port != "http" {
		t.Fatalf("ServiceMonitor: %+v", sm)
	}
	for _, role := range roles {
		svc := r.services["relay-"+role]
		if svc == nil || !labels.SelectorFromSet(sm.Spec.Selector.MatchLabels).Matches(labels.Set(svc.Labels)) || svc.Spec.Ports[0].Name != "http" {
			t.Errorf("the ServiceMonitor does not scrape the %s Service %+v", role, svc)
		}
	}
	if auth := sm.Spec.Endpoints[0].Authorization; auth == nil || r.secrets["relay"].StringData[auth.Credentials.Key] == "" {
		t.Error("the ServiceMonitor scrapes the edges, whose /metrics needs a key, without one")
	}
}

// checkRole checks one role's Deployment and PodDisruptionBudget.
func checkRole(t *testing.T, r rendered, role string) {
	d, ok := r.deployments["relay-"+role]
	if !ok {
		t.Fatalf("no Deployment relay-%s", role)
	}
	got, cfg, files := loadPodConfig(t, r, d)
	if string(got) != role {
		t.Fatalf("runs role %s", got)
	}
	c := d.Spec.Template.Spec.Containers[0]
	if c.Image != "ghcr.io/relaydev/relay:dev" {
		t.Errorf("image %s, want the chart's appVersion as tag", c.Image)
	}
	checkListeners(t, role, cfg, c, true)
	if cfg.NATS.URL != "nats://nats:4222" || cfg.Streams.Replicas != 3 {
		t.Errorf("nats %q, replicas %d: want the NATS chart's service and R3", cfg.NATS.URL, cfg.Streams.Replicas)
	}
	if _, ok := files[cfg.NATS.CredsFile]; !ok {
		t.Errorf("nats.creds_file %q is not mounted", cfg.NATS.CredsFile)
	}
	pod := d.Spec.Template.Spec
	if sc := pod.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser != ociimage.UID {
		t.Errorf("pod security context %+v: want non-root as the image's user %d", sc, ociimage.UID)
	}
	if sc := c.SecurityContext; sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Errorf("container security context %+v: want a read-only root file system", sc)
	}
	grace := time.Duration(*pod.TerminationGracePeriodSeconds) * time.Second
	if grace <= cfg.Worker.DrainTimeout || (role == "worker" && cfg.Worker.DrainTimeout != 30*time.Second) {
		t.Errorf("terminationGracePeriodSeconds %v, drain_timeout %v: the kubelet would kill a draining worker", grace, cfg.Worker.DrainTimeout)
	}
	checkSecrets(t, r, role, cfg, files)

	pdb, ok := r.pdbs["relay-"+role]
	if !ok || pdb.Spec.MaxUnavailable == nil || !selects(pdb.Spec.Selector.MatchLabels, d) {
		t.Errorf("PodDisruptionBudget of %s: %+v", role, pdb)
	}
}

// checkListeners checks where a role listens and how it is probed. The
// edge's API is on every interface, on the container port the Service
// targets; its ops listener (outside the API's connection cap) is on
// loopback, probed with `relay probe` from inside the container. The
// worker's and the coordinator's ops listeners, which ask for no key, are
// on the pod's IP when a ServiceMonitor scrapes them (probed over HTTP),
// on loopback otherwise: never on every interface.
func checkListeners(t *testing.T, role string, cfg config.Config, c corev1.Container, scraped bool) {
	t.Helper()
	ops := map[string]string{"edge": cfg.Edge.OpsListen, "worker": cfg.Worker.Listen, "coordinator": cfg.Coordinator.Listen}[role]
	opsHost, _, err := net.SplitHostPort(ops)
	if err != nil {
		t.Fatalf("ops listener %q: %v", ops, err)
	}
	if role == "edge" {
		host, port, err := net.SplitHostPort(cfg.Edge.Listen)
		if err != nil || host != "0.0.0.0" || len(c.Ports) != 1 || c.Ports[0].Name != "http" || strconv.Itoa(int(c.Ports[0].ContainerPort)) != port {
			t.Errorf("the API listens on %q, container ports %+v: the Service would miss it", cfg.Edge.Listen, c.Ports)
		}
	}
	if role != "edge" && scraped {
		_, port, _ := net.SplitHostPort(ops)
		if opsHost != testPodIP || len(c.Ports) != 1 || c.Ports[0].Name != "http" || strconv.Itoa(int(c.Ports[0].ContainerPort)) != port {
			t.Errorf("ops listener on %q, container ports %+v: want the pod's IP %s, where the Service and the ServiceMonitor look", ops, c.Ports, testPodIP)
		}
		for _, p := range []struct {
			probe *corev1.Probe
			path  string
		}{{c.LivenessProbe, "/healthz"}, {c.ReadinessProbe, "/readyz"}} {
			if p.probe == nil || p.probe.HTTPGet == nil || p.probe.HTTPGet.Path != p.path || p.probe.HTTPGet.Port.String() != "http" {
				t.Errorf("probe of %s: %+v", p.path, p.probe)
			}
		}
		return
	}
	if opsHost != "127.0.0.1" {
		t.Errorf("ops listener on %q, want loopback", ops)
	}
	if role != "edge" && len(c.Ports) != 0 {
		t.Errorf("container ports %+v for a listener on loopback", c.Ports)
	}
	for _, p := range []struct {
		probe *corev1.Probe
		path  string
	}{{c.LivenessProbe, "/healthz"}, {c.ReadinessProbe, "/readyz"}} {
		want := []string{ociimage.Binary, "probe", "http://" + ops + p.path}
		if p.probe == nil || p.probe.Exec == nil || !slices.Equal(p.probe.Exec.Command, want) {
			t.Errorf("probe of %s: %+v, want exec %q", p.path, p.probe, want)
		}
	}
}

// checkSecrets checks that the role gets its secrets from the Secret, and
// only its own: the edge its key hashes and resume token secret, the
// others their providers' keys.
func checkSecrets(t *testing.T, r rendered, role string, cfg config.Config, files map[string]string) {
	t.Helper()
	if role == "edge" {
		if len(cfg.Edge.APIKeys) != 1 || cfg.Edge.APIKeys[0].Tenant != "acme" || !strings.HasPrefix(cfg.Edge.ResumeTokenSecret, "ci-only-") {
			t.Errorf("edge keys %+v, resume token secret %q: want the Secret's", cfg.Edge.APIKeys, cfg.Edge.ResumeTokenSecret)
		}
		for p := range files {
			if strings.Contains(p, "provider-") {
				t.Errorf("the edge sees provider keys at %s", p)
			}
		}
		return
	}
	want := map[string]string{"openai": "sk-ci-one\nsk-ci-two", "backup": "sk-ci-backup"}
	for _, p := range cfg.Providers {
		if got := strings.TrimSpace(files[p.APIKeysFile]); got != want[p.Name] || len(p.APIKeys) != 0 {
			t.Errorf("provider %s: api_keys_file %q holds %q, want %q", p.Name, p.APIKeysFile, got, want[p.Name])
		}
	}
}

// TestHelmCIValuesRefused: the edge of a chart installed with the CI
// values, which anyone can read, does not start, and names the published
// credential: the resume token secret first, then the operator key.
func TestHelmCIValuesRefused(t *testing.T) {
	r := renderChart(t, ciValues, nil)
	_, src, _ := podSources(t, r, r.deployments["relay-edge"])
	_, err := config.Load(src, config.RoleEdge)
	if err == nil || !strings.Contains(err.Error(), "edge.resume_token_secret: a secret the Helm chart's CI values publish") {
		t.Errorf("the CI values' secret: %v", err)
	}
	src.Set = []string{"edge.resume_token_secret=" + strings.Repeat("f1", 32)}
	_, err = config.Load(src, config.RoleEdge)
	if err == nil || !strings.Contains(err.Error(), "edge.api_keys[0].key_sha256: the hash of sk-relay-ci-acme, an operator key the Helm chart's CI values publish") {
		t.Errorf("the CI values' operator key: %v", err)
	}
}

// TestHelmChartToggles renders the parts the values switch: without the
// ServiceMonitor and the HPA (the workers then have a fixed count), with
// anonymous edges and no Secret mounted, and refused without edge keys.
func TestHelmChartToggles(t *testing.T) {
	r := renderChart(t, ciValues, map[string]any{"serviceMonitor.enabled": false, "worker.autoscaling.enabled": false})
	if len(r.serviceMonitors) != 0 || len(r.hpas) != 0 {
		t.Errorf("%d ServiceMonitors, %d HPAs; both switched off", len(r.serviceMonitors), len(r.hpas))
	}
	if n := r.deployments["relay-worker"].Spec.Replicas; n == nil || *n != 2 {
		t.Errorf("worker replicas %v without an HPA, want 2", n)
	}
	for _, role := range roles {
		_, cfg, _ := loadPodConfig(t, r, r.deployments["relay-"+role])
		checkListeners(t, role, cfg, r.deployments["relay-"+role].Spec.Template.Spec.Containers[0], false)
		if _, ok := r.services["relay-"+role]; ok != (role == "edge") {
			t.Errorf("a %s Service without the ServiceMonitor: %v", role, ok)
		}
	}

	defaults := chartDir + "/values.yaml"
	anonymous := map[string]any{"edge.allowAnonymous": true}
	lintChart(t, defaults, anonymous)
	r = renderChart(t, defaults, anonymous)
	_, cfg, files := loadPodConfig(t, r, r.deployments["relay-edge"])
	if !cfg.Edge.AllowAnonymous || len(files) != 1 {
		t.Errorf("anonymous edge: allow_anonymous %v, files %v", cfg.Edge.AllowAnonymous, files)
	}
	if _, err := renderFiles(t, defaults, nil); err == nil || !strings.Contains(err.Error(), "secret.edgeAPIKeys") {
		t.Errorf("the defaults, with no edge keys and no anonymous access, rendered: %v", err)
	}
}

// selects reports whether the selector labels pick d's pods.
func selects(selector map[string]string, d *appsv1.Deployment) bool {
	return len(selector) > 0 && labels.SelectorFromSet(selector).Matches(labels.Set(d.Spec.Template.Labels))
}
