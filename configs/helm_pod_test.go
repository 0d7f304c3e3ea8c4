package configs_test

import (
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/relaydev/relay/relay/config"
)

// podFiles are the files a Deployment's container sees from ConfigMaps
// and Secrets, by path, with the content the rendered objects give them.
// A Secret that is not rendered (one the operator provides, as the NATS
// credentials) gives its paths an empty content.
func podFiles(t *testing.T, r rendered, d *appsv1.Deployment) map[string]string {
	t.Helper()
	spec := d.Spec.Template.Spec
	volumes := map[string]corev1.Volume{}
	for _, v := range spec.Volumes {
		volumes[v.Name] = v
	}
	files := map[string]string{}
	for _, m := range spec.Containers[0].VolumeMounts {
		v, ok := volumes[m.Name]
		if !ok {
			t.Fatalf("%s mounts volume %q, which it does not declare", d.Name, m.Name)
		}
		var items []corev1.KeyToPath
		var data map[string]string
		switch {
		case v.ConfigMap != nil:
			cm, ok := r.configMaps[v.ConfigMap.Name]
			if !ok {
				t.Fatalf("%s mounts ConfigMap %q, which the chart does not render", d.Name, v.ConfigMap.Name)
			}
			items, data = v.ConfigMap.Items, cm.Data
		case v.Secret != nil:
			items = v.Secret.Items
			if s, ok := r.secrets[v.Secret.SecretName]; ok {
				data = s.StringData
			} else {
				data = map[string]string{}
				for _, it := range items {
					data[it.Key] = ""
				}
			}
		default:
			continue // emptyDir
		}
		for _, it := range items {
			content, ok := data[it.Key]
			if !ok {
				t.Errorf("%s mounts key %q of volume %q, which has no such key", d.Name, it.Key, m.Name)
			}
			files[path.Join(m.MountPath, it.Path)] = content
		}
	}
	return files
}

// testPodIP is the pod IP the downward API gives a container in these
// tests.
const testPodIP = "10.1.2.3"

// podEnv is the container's environment with secretKeyRef values taken
// from the rendered Secrets, status.podIP from the downward API as
// testPodIP, and $(VAR) references to earlier variables expanded, as the
// kubelet does.
func podEnv(t *testing.T, r rendered, d *appsv1.Deployment) []string {
	t.Helper()
	var env []string
	vars := map[string]string{}
	for _, e := range d.Spec.Template.Spec.Containers[0].Env {
		v := os.Expand(strings.NewReplacer("$(", "${", ")", "}").Replace(e.Value), func(name string) string { return vars[name] })
		if ref := e.ValueFrom; ref != nil && ref.FieldRef != nil {
			if ref.FieldRef.FieldPath != "status.podIP" {
				t.Fatalf("%s: %s from field %q", d.Name, e.Name, ref.FieldRef.FieldPath)
			}
			v = testPodIP
		}
		if ref := e.ValueFrom; ref != nil && ref.SecretKeyRef != nil {
			s, ok := r.secrets[ref.SecretKeyRef.Name]
			if !ok {
				t.Fatalf("%s: %s from Secret %q, which the chart does not render", d.Name, e.Name, ref.SecretKeyRef.Name)
			}
			if v, ok = s.StringData[ref.SecretKeyRef.Key]; !ok {
				t.Fatalf("%s: %s from key %q, which Secret %s lacks", d.Name, e.Name, ref.SecretKeyRef.Key, s.Name)
			}
		}
		vars[e.Name] = v
		env = append(env, e.Name+"="+v)
	}
	return env
}

// loadPodConfig loads the configuration a container of d would run with,
// through the relay's own loader: its args (<role> --config f1 --config
// f2...), the files mounted at those paths, and its environment. The CI
// values publish their edge's credentials, which the relay refuses
// (TestHelmCIValuesRefused): the load says it is a test.
func loadPodConfig(t *testing.T, r rendered, d *appsv1.Deployment) (config.Role, config.Config, map[string]string) {
	t.Helper()
	role, src, files := podSources(t, r, d)
	src.Set = []string{"edge.allow_example_credentials=true"}
	cfg, err := config.Load(src, role)
	if err != nil {
		t.Fatalf("%s: the rendered configuration does not load for role %s: %v", d.Name, role, err)
	}
	return role, cfg, files
}

// podSources are the role and configuration sources of a container of d,
// and the files mounted in it.
func podSources(t *testing.T, r rendered, d *appsv1.Deployment) (config.Role, config.Sources, map[string]string) {
	t.Helper()
	args := d.Spec.Template.Spec.Containers[0].Args
	files := podFiles(t, r, d)
	dir := t.TempDir()
	src := config.Sources{Environ: podEnv(t, r, d)}
	for i := 1; i < len(args); i += 2 {
		if args[i] != "--config" || i+1 >= len(args) {
			t.Fatalf("%s: args %q: want <role> followed by --config pairs", d.Name, args)
		}
		content, ok := files[args[i+1]]
		if !ok {
			t.Fatalf("%s: --config %s is not a mounted file (mounted: %v)", d.Name, args[i+1], files)
		}
		local := filepath.Join(dir, filepath.Base(args[i+1]))
		if err := os.WriteFile(local, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if src.File == "" {
			src.File = local
		} else {
			src.Overlays = append(src.Overlays, local)
		}
	}
	return config.Role(args[0]), src, files
}
