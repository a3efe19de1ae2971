// Package check validates deploy artifacts with the libraries that define
// them: the Kubernetes objects of deploy/k8s decode strictly into the real
// API types, run a pinned release's image and trust no range wider than
// the ipBlocks their NetworkPolicies admit (trust_test.go); the production
// overlay deploy/k8s-production, rendered with kustomize's Go API, passes
// the same checks and its own (production_test.go); deploy/compose's
// compose.yaml, rendered by docker-compose, decodes strictly and runs what
// a node needs (compose_test.go); and the Dockerfile parses with
// buildkit's own parser and stamps the version as `make build` does
// (release_test.go). It is a module of its own so that those libraries
// stay out of Mayfly's go.mod; deploy/test.sh runs it on every full
// `make test`.
package check

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/parser"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/yaml"
)

const repo = "../.."

// settings are the MAYFLY_* names of docs/settings.md's table, the list
// cmd/mayfly's own test keeps equal to the code's.
func settings(t *testing.T) map[string]bool {
	b, err := os.ReadFile(filepath.Join(repo, "docs", "settings.md"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	re := regexp.MustCompile("^\\| `(MAYFLY_[A-Z0-9_]+)` \\|")
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if m := re.FindStringSubmatch(sc.Text()); m != nil {
			out[m[1]] = true
		}
	}
	if len(out) < 20 {
		t.Fatalf("found %d settings in docs/settings.md: table not found", len(out))
	}
	return out
}

// kustomization is the part of kustomization.yaml the base uses; decoding
// it strictly catches a misspelt field.
type kustomization struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Labels     []struct {
		Pairs map[string]string `json:"pairs"`
	} `json:"labels"`
	Resources []string      `json:"resources"`
	Images    []imageChange `json:"images"`
}

// imageChange is one entry of kustomize's images: the containers whose
// image has the name Name get NewName, NewTag or Digest instead.
type imageChange struct {
	Name    string `json:"name"`
	NewName string `json:"newName"`
	NewTag  string `json:"newTag"`
	Digest  string `json:"digest"`
}

type objects struct {
	deployments map[string]*appsv1.Deployment
	services    map[string]*corev1.Service
	pdbs        map[string]*policyv1.PodDisruptionBudget
	hpas        map[string]*autoscalingv2.HorizontalPodAutoscaler
	configMaps  map[string]*corev1.ConfigMap
	policies    map[string]*networkingv1.NetworkPolicy
	ingresses   map[string]*networkingv1.Ingress
	images      []imageChange // the kustomization's
}

// base is the kustomize base of deploy/k8s.
var base = filepath.Join(repo, "deploy", "k8s")

// load decodes every object of every resource of the kustomization in dir,
// strictly: an unknown or misplaced field is an error, as it would be for
// kubectl with server-side field validation.
func load(t *testing.T, dir string) objects {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var k kustomization
	if err := yaml.UnmarshalStrict(b, &k); err != nil {
		t.Fatalf("kustomization.yaml: %v", err)
	}
	if k.Kind != "Kustomization" || len(k.Resources) == 0 {
		t.Fatalf("kustomization.yaml: kind %q, %d resources", k.Kind, len(k.Resources))
	}
	o := newObjects()
	o.images = k.Images
	for _, res := range k.Resources {
		b, err := os.ReadFile(filepath.Join(dir, res))
		if err != nil {
			t.Fatal(err)
		}
		o.decode(t, res, b, false)
	}
	return o
}

func newObjects() objects {
	return objects{map[string]*appsv1.Deployment{}, map[string]*corev1.Service{}, map[string]*policyv1.PodDisruptionBudget{},
		map[string]*autoscalingv2.HorizontalPodAutoscaler{}, map[string]*corev1.ConfigMap{},
		map[string]*networkingv1.NetworkPolicy{}, map[string]*networkingv1.Ingress{}, nil}
}

// decode adds every object of the YAML stream b (named res in messages) to
// o, strictly. Objects of other kinds fail the test, or are skipped when
// others is set (a rendered overlay may add an Ingress, a Secret...).
func (o objects) decode(t *testing.T, res string, b []byte, others bool) {
	t.Helper()
	for i, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(b), -1) {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		var meta struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			t.Fatalf("%s doc %d: %v", res, i, err)
		}
		var obj interface{ GetName() string }
		switch meta.APIVersion + " " + meta.Kind {
		case "apps/v1 Deployment":
			obj = &appsv1.Deployment{}
		case "v1 Service":
			obj = &corev1.Service{}
		case "policy/v1 PodDisruptionBudget":
			obj = &policyv1.PodDisruptionBudget{}
		case "autoscaling/v2 HorizontalPodAutoscaler":
			obj = &autoscalingv2.HorizontalPodAutoscaler{}
		case "v1 ConfigMap":
			obj = &corev1.ConfigMap{}
		case "networking.k8s.io/v1 NetworkPolicy":
			obj = &networkingv1.NetworkPolicy{}
		case "networking.k8s.io/v1 Ingress":
			obj = &networkingv1.Ingress{}
		default:
			if others {
				continue
			}
			t.Fatalf("%s doc %d: unexpected %s %s", res, i, meta.APIVersion, meta.Kind)
		}
		if err := yaml.UnmarshalStrict([]byte(doc), obj); err != nil {
			t.Fatalf("%s doc %d (%s): %v", res, i, meta.Kind, err)
		}
		switch v := obj.(type) {
		case *appsv1.Deployment:
			o.deployments[v.Name] = v
		case *corev1.Service:
			o.services[v.Name] = v
		case *policyv1.PodDisruptionBudget:
			o.pdbs[v.Name] = v
		case *autoscalingv2.HorizontalPodAutoscaler:
			o.hpas[v.Name] = v
		case *corev1.ConfigMap:
			o.configMaps[v.Name] = v
		case *networkingv1.NetworkPolicy:
			o.policies[v.Name] = v
		case *networkingv1.Ingress:
			o.ingresses[v.Name] = v
		}
	}
}

func TestKubernetesBase(t *testing.T) {
	checkObjects(t, load(t, base))
}

// checkObjects holds the objects of the base, or of an overlay rendered,
// to what every deployment of Mayfly needs.
func checkObjects(t *testing.T, o objects) {
	t.Helper()
	known := settings(t)
	cm := o.configMaps["mayfly-config"]
	if cm == nil {
		t.Fatal("no ConfigMap mayfly-config")
	}
	for key := range cm.Data {
		if !known[key] {
			t.Errorf("ConfigMap sets %s, which is no Mayfly setting", key)
		}
	}
	if _, ok := cm.Data["MAYFLY_REDIS_PASSWORD"]; ok {
		t.Error("ConfigMap holds MAYFLY_REDIS_PASSWORD: a password belongs in a Secret (MAYFLY_REDIS_PASSWORD_FILE)")
	}
	for _, kind := range []string{"edge", "ingest"} {
		name := "mayfly-" + kind
		d := o.deployments[name]
		if d == nil {
			t.Fatalf("no Deployment %s", name)
		}
		pod := d.Spec.Template
		if !matches(d.Spec.Selector.MatchLabels, pod.Labels) {
			t.Errorf("%s: selector %v does not select its pods %v", name, d.Spec.Selector.MatchLabels, pod.Labels)
		}
		if len(pod.Spec.Containers) != 1 {
			t.Fatalf("%s: %d containers", name, len(pod.Spec.Containers))
		}
		c := pod.Spec.Containers[0]
		if !slices.Equal(c.Args, []string{kind}) {
			t.Errorf("%s: args %v, want [%s]", name, c.Args, kind)
		}
		if len(c.EnvFrom) != 1 || c.EnvFrom[0].ConfigMapRef == nil || c.EnvFrom[0].ConfigMapRef.Name != "mayfly-config" {
			t.Errorf("%s: does not take its settings from mayfly-config", name)
		}
		admin := -1
		for _, p := range c.Ports {
			if p.Name == "admin" {
				admin = int(p.ContainerPort)
			}
		}
		if admin != 9090 {
			t.Errorf("%s: admin port %d, want 9090 (the image's MAYFLY_ADMIN_ADDR)", name, admin)
		}
		for probe, path := range map[*corev1.Probe]string{c.ReadinessProbe: "/readyz", c.LivenessProbe: "/healthz"} {
			if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != path || probe.HTTPGet.Port.String() != "admin" {
				t.Errorf("%s: want a probe on %s at the admin port, got %+v", name, path, probe)
			}
		}
		if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
			t.Errorf("%s: CPU and memory requests and a memory limit are required", name)
		}
		sc := c.SecurityContext
		if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
			sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			t.Errorf("%s: want a read-only root and no privilege escalation", name)
		}
		if ps := pod.Spec.SecurityContext; ps == nil || ps.RunAsNonRoot == nil || !*ps.RunAsNonRoot {
			t.Errorf("%s: must run as non-root", name)
		}
		// The Redis password comes from the Secret as a file, never as a value.
		pwFile := cm.Data["MAYFLY_REDIS_PASSWORD_FILE"]
		mounted := false
		for _, m := range c.VolumeMounts {
			for _, v := range pod.Spec.Volumes {
				if v.Name == m.Name && v.Secret != nil && v.Secret.SecretName == "mayfly-redis" && m.ReadOnly &&
					strings.HasPrefix(pwFile, strings.TrimSuffix(m.MountPath, "/")+"/") {
					mounted = true
				}
			}
		}
		if !mounted {
			t.Errorf("%s: MAYFLY_REDIS_PASSWORD_FILE %q is not in a read-only mount of the Secret mayfly-redis", name, pwFile)
		}
		if s := o.services[name]; s == nil || !matches(s.Spec.Selector, pod.Labels) {
			t.Errorf("%s: no Service selecting its pods", name)
		}
		checkAdminExposure(t, o, name, pod, c)
		checkDrain(t, name, pod, c, cm.Data)
		if p := o.pdbs[name]; p == nil || !matches(p.Spec.Selector.MatchLabels, pod.Labels) {
			t.Errorf("%s: no PodDisruptionBudget covering its pods", name)
		}
	}
	h := o.hpas["mayfly-edge"]
	if h == nil || h.Spec.ScaleTargetRef.Kind != "Deployment" || h.Spec.ScaleTargetRef.Name != "mayfly-edge" {
		t.Fatalf("want an HPA scaling Deployment mayfly-edge, got %+v", h)
	}
	if h.Spec.MinReplicas == nil || *h.Spec.MinReplicas < 2 {
		t.Errorf("edge HPA: minReplicas below 2 defeats the PodDisruptionBudget")
	}
}

// checkAdminExposure holds the admin port (pprof where enabled, metrics,
// readiness) out of every Service, keeps Prometheus scraping it through pod
// annotations, and requires a NetworkPolicy that admits it only from the
// monitoring namespace's Prometheus.
func checkAdminExposure(t *testing.T, o objects, name string, pod corev1.PodTemplateSpec, c corev1.Container) {
	t.Helper()
	for _, s := range o.services {
		if !matches(s.Spec.Selector, pod.Labels) {
			continue
		}
		for _, p := range s.Spec.Ports {
			if p.Port == 9090 || p.TargetPort.String() == "admin" || p.TargetPort.IntValue() == 9090 {
				t.Errorf("Service %s publishes %s's admin port (%s): admin must never be in a Service", s.Name, name, p.Name)
			}
		}
	}
	a := pod.Annotations
	if a["prometheus.io/scrape"] != "true" || a["prometheus.io/port"] != "9090" || a["prometheus.io/path"] != "/metrics" {
		t.Errorf("%s: pod annotations %v: want prometheus.io/scrape, port 9090 and path /metrics", name, a)
	}
	var policy *networkingv1.NetworkPolicy
	for _, np := range o.policies {
		if matches(np.Spec.PodSelector.MatchLabels, pod.Labels) && slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) {
			policy = np
		}
	}
	if policy == nil {
		t.Errorf("%s: no NetworkPolicy restricts ingress to its pods", name)
		return
	}
	var public []string
	for _, p := range c.Ports {
		if p.Name != "admin" {
			public = append(public, p.Name)
		}
	}
	adminAllowed := false
	for _, rule := range policy.Spec.Ingress {
		for _, p := range rule.Ports {
			if p.Port == nil || (p.Port.String() != "admin" && p.Port.IntValue() != 9090) {
				continue
			}
			adminAllowed = true
			if len(rule.From) == 0 {
				t.Errorf("NetworkPolicy %s: admits the admin port from anywhere", policy.Name)
			}
			for _, from := range rule.From {
				if from.NamespaceSelector == nil || len(from.NamespaceSelector.MatchLabels) == 0 || from.PodSelector == nil ||
					len(from.PodSelector.MatchLabels) == 0 || from.IPBlock != nil {
					t.Errorf("NetworkPolicy %s: admin port peer %+v: want a namespace and a pod selector (Prometheus)", policy.Name, from)
				}
			}
		}
		if len(rule.Ports) == 0 {
			t.Errorf("NetworkPolicy %s: a rule without ports admits every port, the admin port too", policy.Name)
		}
	}
	if !adminAllowed {
		t.Errorf("NetworkPolicy %s: Prometheus cannot reach the admin port", policy.Name)
	}
	// Who may reach the public ports, and that the nodes trust no one
	// else, is checkTrust's (trust_test.go).
	for _, name := range public {
		ok := false
		for _, rule := range policy.Spec.Ingress {
			for _, p := range rule.Ports {
				ok = ok || (p.Port != nil && p.Port.String() == name)
			}
		}
		if !ok {
			t.Errorf("NetworkPolicy %s: clients cannot reach port %s", policy.Name, name)
		}
	}
}

// checkDrain holds a Deployment to the node's graceful drain (deploy/README.md,
// "Graceful drain"): after SIGTERM the node serves on for MAYFLY_DRAIN_DELAY
// with /readyz at 503, then finishes what is in flight within
// MAYFLY_SHUTDOWN_TIMEOUT. The readiness probe must take the pod out well
// within the drain delay (its period × failure threshold at most half of
// it), and the grace period must cover the delay and the timeout, or the
// kubelet's SIGKILL cuts the transactions the drain lets finish.
func checkDrain(t *testing.T, name string, pod corev1.PodTemplateSpec, c corev1.Container, config map[string]string) {
	t.Helper()
	setting := func(key string) time.Duration {
		v, ok := config[key]
		if !ok {
			v = settingDefaults(t)[key]
		}
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("%s = %q: %v", key, v, err)
		}
		return d
	}
	drain, shutdown := setting("MAYFLY_DRAIN_DELAY"), setting("MAYFLY_SHUTDOWN_TIMEOUT")
	if drain <= 0 {
		t.Errorf("%s: MAYFLY_DRAIN_DELAY %v: pods would close their listeners while still in the endpoints", name, drain)
	}
	if p := c.ReadinessProbe; p != nil {
		if unready := time.Duration(p.PeriodSeconds*max(p.FailureThreshold, 1)) * time.Second; 2*unready > drain {
			t.Errorf("%s: the readiness probe takes up to %v (periodSeconds × failureThreshold) to see a drain, over half of MAYFLY_DRAIN_DELAY %v", name, unready, drain)
		}
	}
	grace := 30 * time.Second // Kubernetes' default
	if g := pod.Spec.TerminationGracePeriodSeconds; g != nil {
		grace = time.Duration(*g) * time.Second
	}
	if grace < drain+shutdown {
		t.Errorf("%s: terminationGracePeriodSeconds %v < MAYFLY_DRAIN_DELAY %v + MAYFLY_SHUTDOWN_TIMEOUT %v", name, grace, drain, shutdown)
	}
}

// settingDefaults are docs/settings.md's table's defaults: name → value
// (without its backquotes).
func settingDefaults(t *testing.T) map[string]string {
	b, err := os.ReadFile(filepath.Join(repo, "docs", "settings.md"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	re := regexp.MustCompile("^\\| `(MAYFLY_[A-Z0-9_]+)` \\| `([^`]*)` \\|")
	for line := range strings.Lines(string(b)) {
		if m := re.FindStringSubmatch(line); m != nil {
			out[m[1]] = m[2]
		}
	}
	return out
}

// matches reports whether labels carry every selector pair.
func matches(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func TestDockerfile(t *testing.T) {
	f, err := os.Open(filepath.Join(repo, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ast, err := parser.Parse(f)
	if err != nil {
		t.Fatal(err)
	}
	stages, _, err := instructions.Parse(ast.AST, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(stages) < 2 {
		t.Fatalf("%d stages, want a multi-stage build", len(stages))
	}
	var built bool
	for _, c := range stages[0].Commands {
		if r, ok := c.(*instructions.RunCommand); ok {
			line := strings.Join(r.CmdLine, " ")
			if strings.Contains(line, "CGO_ENABLED=0") && strings.Contains(line, "go build") && strings.Contains(line, "./cmd/mayfly") {
				built = true
			}
		}
	}
	if !built {
		t.Error("the build stage does not build ./cmd/mayfly with CGO_ENABLED=0 (a static binary)")
	}
	final := stages[len(stages)-1]
	var user string
	var copied, entry bool
	for _, c := range final.Commands {
		switch v := c.(type) {
		case *instructions.UserCommand:
			user = v.User
		case *instructions.CopyCommand:
			copied = v.From == stages[0].Name
		case *instructions.EntrypointCommand:
			entry = len(v.CmdLine) == 1 && v.CmdLine[0] == "/usr/local/bin/mayfly"
		}
	}
	for _, c := range final.Commands {
		if e, ok := c.(*instructions.EnvCommand); ok {
			for _, kv := range e.Env {
				if kv.Key == "MAYFLY_ADMIN_PPROF" && kv.Value != "off" && kv.Value != "auto" {
					t.Errorf("the image sets MAYFLY_ADMIN_PPROF=%s: its admin listener is on 0.0.0.0, pprof must stay off", kv.Value)
				}
			}
		}
	}
	if user == "" || strings.HasPrefix(user, "0") || user == "root" {
		t.Errorf("final stage runs as %q, want a non-root user", user)
	}
	if !copied || !entry {
		t.Errorf("final stage must copy the binary from the build stage (%v) and run it (%v)", copied, entry)
	}
	if !strings.Contains(final.BaseName, "distroless") && final.BaseName != "scratch" {
		t.Errorf("final base %q, want a minimal runtime image", final.BaseName)
	}
}
