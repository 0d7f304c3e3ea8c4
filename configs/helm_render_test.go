package configs_test

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

const chartDir = "helm/relay"

// rendered is the chart's manifests, decoded into the Kubernetes API
// types by kind and name.
type rendered struct {
	deployments     map[string]*appsv1.Deployment
	services        map[string]*corev1.Service
	configMaps      map[string]*corev1.ConfigMap
	secrets         map[string]*corev1.Secret
	pdbs            map[string]*policyv1.PodDisruptionBudget
	hpas            map[string]*autoscalingv2.HorizontalPodAutoscaler
	serviceMonitors map[string]*monitoringv1.ServiceMonitor
}

// lintChart runs `helm lint` on the chart with the values file and set
// (as --set gives them), and fails the test on any message worse than
// information.
func lintChart(t *testing.T, valuesFile string, set map[string]any) {
	t.Helper()
	res := lint.AllWithKubeVersion(chartDir, userValues(t, valuesFile, set), "relay", nil)
	for _, m := range res.Messages {
		if m.Severity > support.InfoSev {
			t.Errorf("helm lint: %s", m)
		}
	}
}

// userValues are the values of valuesFile with set applied, as -f and
// --set give them.
func userValues(t *testing.T, valuesFile string, set map[string]any) map[string]any {
	t.Helper()
	vals, err := chartutil.ReadValuesFile(valuesFile)
	if err != nil {
		t.Fatal(err)
	}
	user := vals.AsMap()
	for path, v := range set {
		setPath(user, strings.Split(path, "."), v)
	}
	return user
}

// renderFiles renders the chart's templates as `helm template relay
// configs/helm/relay -f valuesFile --set ...` does; strict: an undefined
// value is an error.
func renderFiles(t *testing.T, valuesFile string, set map[string]any) (map[string]string, error) {
	t.Helper()
	chrt, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	top, err := chartutil.ToRenderValues(chrt, userValues(t, valuesFile, set), chartutil.ReleaseOptions{Name: "relay", Namespace: "relay", IsInstall: true}, chartutil.DefaultCapabilities)
	if err != nil {
		t.Fatal(err)
	}
	return engine.Engine{Strict: true}.Render(chrt, top)
}

// renderChart renders the chart (renderFiles) and decodes every manifest
// strictly into its API type: an unknown field, a wrong type or an
// unknown kind fails the test.
func renderChart(t *testing.T, valuesFile string, set map[string]any) rendered {
	t.Helper()
	files, err := renderFiles(t, valuesFile, set)
	if err != nil {
		t.Fatalf("helm template: %v", err)
	}
	r := rendered{
		deployments: map[string]*appsv1.Deployment{}, services: map[string]*corev1.Service{},
		configMaps: map[string]*corev1.ConfigMap{}, secrets: map[string]*corev1.Secret{},
		pdbs: map[string]*policyv1.PodDisruptionBudget{}, hpas: map[string]*autoscalingv2.HorizontalPodAutoscaler{},
		serviceMonitors: map[string]*monitoringv1.ServiceMonitor{},
	}
	for _, name := range slices.Sorted(maps.Keys(files)) {
		if !strings.HasSuffix(name, ".yaml") {
			continue // NOTES.txt, helpers
		}
		for _, doc := range bytes.Split([]byte(files[name]), []byte("\n---")) {
			if len(bytes.TrimSpace(doc)) == 0 {
				continue
			}
			if err := r.decode(doc); err != nil {
				t.Fatalf("%s: %v\n%s", name, err, doc)
			}
		}
	}
	return r
}

// decode decodes one manifest strictly by its apiVersion and kind.
func (r *rendered) decode(doc []byte) error {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return err
	}
	kinds := map[string]func([]byte) error{
		"apps/v1 Deployment":                      decodeInto(r.deployments),
		"v1 Service":                              decodeInto(r.services),
		"v1 ConfigMap":                            decodeInto(r.configMaps),
		"v1 Secret":                               decodeInto(r.secrets),
		"policy/v1 PodDisruptionBudget":           decodeInto(r.pdbs),
		"autoscaling/v2 HorizontalPodAutoscaler":  decodeInto(r.hpas),
		"monitoring.coreos.com/v1 ServiceMonitor": decodeInto(r.serviceMonitors),
	}
	decode, ok := kinds[tm.APIVersion+" "+tm.Kind]
	if !ok {
		return fmt.Errorf("unexpected kind %q %q", tm.APIVersion, tm.Kind)
	}
	return decode(doc)
}

// decodeInto decodes a manifest strictly into a new T and keeps it in m
// by name.
func decodeInto[T any, P interface {
	*T
	GetName() string
}](m map[string]P) func([]byte) error {
	return func(doc []byte) error {
		o := P(new(T))
		if err := yaml.UnmarshalStrict(doc, o); err != nil {
			return fmt.Errorf("strict decode: %w", err)
		}
		if o.GetName() == "" {
			return fmt.Errorf("a manifest without a name")
		}
		m[o.GetName()] = o
		return nil
	}
}

// setPath sets m[path[0]][path[1]]... = v, as --set does.
func setPath(m map[string]any, path []string, v any) {
	for _, k := range path[:len(path)-1] {
		next, ok := m[k].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[k] = next
		}
		m = next
	}
	m[path[len(path)-1]] = v
}
