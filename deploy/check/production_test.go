package check

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// production is the production overlay of the base (deploy/README.md,
// "Production overlay").
var production = filepath.Join(repo, "deploy", "k8s-production")

// render runs kustomize's own Go API on the kustomization in dir, offline,
// as `kubectl kustomize dir` would, and decodes every object strictly: a
// kind the checks do not know fails the test.
func render(t *testing.T, dir string) objects {
	t.Helper()
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize %s: %v", dir, err)
	}
	b, err := m.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	o := newObjects()
	o.decode(t, dir, b, false)
	return o
}

// proxyProtocolAnnotations are the Service annotations by which cloud
// load balancers send the PROXY protocol, with the values that turn it on.
var proxyProtocolAnnotations = map[string][]string{
	"service.beta.kubernetes.io/aws-load-balancer-proxy-protocol":       {"*"},
	"service.beta.kubernetes.io/do-loadbalancer-enable-proxy-protocol":  {"true"},
	"load-balancer.hetzner.cloud/uses-proxyprotocol":                    {"true"},
	"service.beta.kubernetes.io/linode-loadbalancer-proxy-protocol":     {"v2"},
	"service.beta.kubernetes.io/scw-loadbalancer-proxy-protocol-v2":     {"true"},
	"service.beta.kubernetes.io/exoscale-loadbalancer-service-strategy": {"proxy-protocol"},
}

func TestProductionOverlay(t *testing.T) {
	o := render(t, production)
	// Everything the base is held to, and its trust ranges filled in and
	// inside the ipBlocks the NetworkPolicies admit.
	checkObjects(t, o)
	for _, msg := range checkTrust(o) {
		t.Error(msg)
	}
	cm := o.configMaps["mayfly-config"].Data

	t.Run("image", func(t *testing.T) {
		if err := pinnedImages(o); err != nil {
			t.Error(err)
		}
		want := resolveImage("mayfly", load(t, base).images)
		for name, d := range o.deployments {
			if got := d.Spec.Template.Spec.Containers[0].Image; got != want {
				t.Errorf("%s runs %s, want the base's pin %s", name, got, want)
			}
		}
	})

	t.Run("ingress", func(t *testing.T) {
		heartbeat := setting(t, cm, "MAYFLY_EVENTS_HEARTBEAT")
		edge := o.services["mayfly-edge"]
		n := 0
		for _, ing := range o.ingresses {
			n++
			if ing.Spec.IngressClassName == nil || *ing.Spec.IngressClassName == "" {
				t.Errorf("Ingress %s: no ingressClassName", ing.Name)
			}
			tls := map[string]bool{}
			for _, e := range ing.Spec.TLS {
				if e.SecretName == "" {
					t.Errorf("Ingress %s: a TLS entry without a secretName", ing.Name)
				}
				for _, h := range e.Hosts {
					tls[h] = true
				}
			}
			for _, r := range ing.Spec.Rules {
				if !tls[r.Host] {
					t.Errorf("Ingress %s: host %q is served without TLS", ing.Name, r.Host)
				}
				for _, p := range r.HTTP.Paths {
					b := p.Backend.Service
					if b == nil || b.Name != edge.Name || !slices.ContainsFunc(edge.Spec.Ports, func(sp corev1.ServicePort) bool {
						return sp.Name == b.Port.Name && sp.Name != "" || sp.Port == b.Port.Number && sp.Port != 0
					}) {
						t.Errorf("Ingress %s: path %s does not reach Service %s's http port", ing.Name, p.Path, edge.Name)
					}
				}
			}
			// ingress-nginx closes a proxied connection silent for
			// proxy-read-timeout (60 s by default; other controllers differ):
			// an event stream is silent for a heartbeat at most.
			a := ing.Annotations
			for _, key := range []string{"nginx.ingress.kubernetes.io/proxy-read-timeout", "nginx.ingress.kubernetes.io/proxy-send-timeout"} {
				s, err := strconv.Atoi(a[key])
				if err != nil {
					t.Errorf("Ingress %s: %s = %q, want seconds", ing.Name, key, a[key])
				} else if d := time.Duration(s) * time.Second; d <= heartbeat {
					t.Errorf("Ingress %s: %s %v, not above MAYFLY_EVENTS_HEARTBEAT %v: idle event streams are cut", ing.Name, key, d, heartbeat)
				}
			}
			if got := a["nginx.ingress.kubernetes.io/proxy-buffering"]; got != "off" {
				t.Errorf("Ingress %s: proxy-buffering %q, want off (events held in the proxy's buffer)", ing.Name, got)
			}
		}
		if n == 0 {
			t.Error("no Ingress")
		}
	})

	t.Run("smtp load balancer", func(t *testing.T) {
		ingest := o.deployments["mayfly-ingest"].Spec.Template
		var lbs []*corev1.Service
		for _, s := range o.services {
			if s.Spec.Type == corev1.ServiceTypeLoadBalancer && matches(s.Spec.Selector, ingest.Labels) {
				lbs = append(lbs, s)
			}
		}
		if len(lbs) != 1 {
			t.Fatalf("%d LoadBalancer Services select the ingest pods, want 1", len(lbs))
		}
		s := lbs[0]
		if len(s.Spec.Ports) != 1 || s.Spec.Ports[0].TargetPort.String() != "smtp" || s.Spec.Ports[0].Port != 25 {
			t.Errorf("Service %s: ports %+v, want 25 to smtp only", s.Name, s.Spec.Ports)
		}
		proxy := false
		for key, values := range proxyProtocolAnnotations {
			if v, ok := s.Annotations[key]; ok && slices.Contains(values, v) {
				proxy = true
			}
		}
		from := cm["MAYFLY_SMTP_PROXY_PROTOCOL_FROM"]
		if !proxy || strings.TrimSpace(from) == "" {
			t.Errorf("Service %s sends the PROXY protocol: %v; MAYFLY_SMTP_PROXY_PROTOCOL_FROM %q: want both (a node reads a PROXY header only from those peers)", s.Name, proxy, from)
		}
		if s.Spec.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyLocal {
			t.Errorf("Service %s: externalTrafficPolicy %q, want Local (no hop through another node's source NAT)", s.Name, s.Spec.ExternalTrafficPolicy)
		}
		// AWS NLB IP targets keep the client's address as the source unless
		// told not to: the pods would see senders, not the trusted load
		// balancer, and refuse its PROXY headers.
		if s.Annotations["service.beta.kubernetes.io/aws-load-balancer-nlb-target-type"] == "ip" &&
			!strings.Contains(s.Annotations["service.beta.kubernetes.io/aws-load-balancer-target-group-attributes"], "preserve_client_ip.enabled=false") {
			t.Errorf("Service %s: NLB IP targets preserve the client's address: the pods never see the load balancer's", s.Name)
		}
	})

	t.Run("GOMEMLIMIT", func(t *testing.T) {
		for name, d := range o.deployments {
			c := d.Spec.Template.Spec.Containers[0]
			limit := c.Resources.Limits.Memory().Value()
			i := slices.IndexFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "GOMEMLIMIT" })
			if i < 0 {
				t.Errorf("%s: no GOMEMLIMIT", name)
				continue
			}
			got, err := goMemLimit(c.Env[i].Value)
			if err != nil {
				t.Errorf("%s: %v", name, err)
				continue
			}
			if got >= limit || got < limit*8/10 {
				t.Errorf("%s: GOMEMLIMIT %s (%d B) not within 80–100 %% of the memory limit %d B", name, c.Env[i].Value, got, limit)
			}
		}
	})

	t.Run("topology spread", func(t *testing.T) {
		for name, d := range o.deployments {
			pod := d.Spec.Template
			ok := slices.ContainsFunc(pod.Spec.TopologySpreadConstraints, func(c corev1.TopologySpreadConstraint) bool {
				return c.TopologyKey == "topology.kubernetes.io/zone" && c.LabelSelector != nil &&
					matches(c.LabelSelector.MatchLabels, pod.Labels) && c.MaxSkew == 1
			})
			if !ok {
				t.Errorf("%s: no spread of its own pods across zones", name)
			}
		}
	})

	t.Run("ingest autoscaling", func(t *testing.T) {
		h := o.hpas["mayfly-ingest"]
		if h == nil || h.Spec.ScaleTargetRef.Kind != "Deployment" || h.Spec.ScaleTargetRef.Name != "mayfly-ingest" {
			t.Fatalf("want an HPA scaling Deployment mayfly-ingest, got %+v", h)
		}
		if h.Spec.MinReplicas == nil || *h.Spec.MinReplicas < 2 || h.Spec.MaxReplicas <= *h.Spec.MinReplicas {
			t.Errorf("ingest HPA: %v–%d replicas, want at least 2 and room to grow", h.Spec.MinReplicas, h.Spec.MaxReplicas)
		}
		if len(h.Spec.Metrics) == 0 {
			t.Error("ingest HPA: no metric")
		}
	})

	t.Run("SMTP hostname", func(t *testing.T) {
		if h := cm["MAYFLY_SMTP_HOSTNAME"]; !regexp.MustCompile(`^([a-z0-9-]+\.)+[a-z]+$`).MatchString(h) {
			t.Errorf("MAYFLY_SMTP_HOSTNAME %q, want a fully qualified name (else the pod's random hostname greets)", h)
		}
	})

	t.Run("Redis Cluster values", func(t *testing.T) {
		checkRedisValues(t, filepath.Join(production, "redis-cluster-values.yaml"), cm)
	})
}

// goMemLimit parses GOMEMLIMIT as the Go runtime does: bytes, with an
// optional B, KiB, MiB, GiB or TiB suffix.
func goMemLimit(v string) (int64, error) {
	units := []struct {
		suffix string
		n      int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}}
	for _, u := range units {
		if num, ok := strings.CutSuffix(v, u.suffix); ok {
			n, err := strconv.ParseInt(num, 10, 64)
			if err != nil {
				return 0, fmt.Errorf("GOMEMLIMIT %q: %w", v, err)
			}
			return n * u.n, nil
		}
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("GOMEMLIMIT %q: %w", v, err)
	}
	return n, nil
}

// setting is a duration setting from the ConfigMap, or docs/settings.md's default.
func setting(t *testing.T, cm map[string]string, key string) time.Duration {
	t.Helper()
	v, ok := cm[key]
	if !ok {
		v = settingDefaults(t)[key]
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("%s = %q: %v", key, v, err)
	}
	return d
}

// redisClusterValues is the part of Bitnami's redis-cluster chart values
// the overlay sets (the chart's values.yaml names them); decoding strictly
// catches a misspelt or misplaced key, which the chart would ignore.
type redisClusterValues struct {
	Cluster struct {
		Nodes    int `json:"nodes"`
		Replicas int `json:"replicas"`
	} `json:"cluster"`
	UsePassword               bool   `json:"usePassword"`
	ExistingSecret            string `json:"existingSecret"`
	ExistingSecretPasswordKey string `json:"existingSecretPasswordKey"`
	Redis                     struct {
		Configmap                 string                            `json:"configmap"`
		Resources                 corev1.ResourceRequirements       `json:"resources"`
		TopologySpreadConstraints []corev1.TopologySpreadConstraint `json:"topologySpreadConstraints"`
	} `json:"redis"`
	Persistence struct {
		Size resource.Quantity `json:"size"`
	} `json:"persistence"`
}

// checkRedisValues holds the chart values in path to deploy/README.md's
// "Redis settings", to the Secret Mayfly reads and to the seeds of
// MAYFLY_REDIS_ADDRS (the release "redis-cluster": pods
// redis-cluster-N.redis-cluster-headless).
func checkRedisValues(t *testing.T, path string, cm map[string]string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var v redisClusterValues
	if err := yaml.UnmarshalStrict(b, &v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	conf := map[string]string{}
	for line := range strings.Lines(v.Redis.Configmap) {
		if f := strings.Fields(line); len(f) == 2 {
			conf[f[0]] = f[1]
		} else if len(f) > 0 {
			t.Errorf("redis.configmap: %q is not one setting and its value", strings.TrimSpace(line))
		}
	}
	want := readmeRedisSettings(t)
	for key, val := range want {
		if key == "maxmemory" {
			continue // the machine's; checked against the limit below
		}
		if conf[key] != val {
			t.Errorf("redis.configmap: %s %q, want %q (deploy/README.md, Redis settings)", key, conf[key], val)
		}
	}
	max, err := redisBytes(conf["maxmemory"])
	if err != nil || max <= 0 {
		t.Errorf("redis.configmap: maxmemory %q: want a limit (%v)", conf["maxmemory"], err)
	}
	limit := v.Redis.Resources.Limits.Memory().Value()
	if limit == 0 || max >= limit*9/10 {
		t.Errorf("maxmemory %d B leaves under 10 %% of the memory limit %d B to replication, forks and the allocator", max, limit)
	}
	if v.Cluster.Replicas < 1 || v.Cluster.Nodes < 3*(1+v.Cluster.Replicas) {
		t.Errorf("cluster: %d nodes, %d replicas: want 3 primaries or more, each with a replica", v.Cluster.Nodes, v.Cluster.Replicas)
	}
	if !v.UsePassword || v.ExistingSecret != "mayfly-redis" || v.ExistingSecretPasswordKey != "password" {
		t.Errorf("password: usePassword %v from %s/%s, want the Secret mayfly-redis's key password, which the nodes mount", v.UsePassword, v.ExistingSecret, v.ExistingSecretPasswordKey)
	}
	seed := regexp.MustCompile(`^redis-cluster-(\d+)\.redis-cluster-headless:6379$`)
	seeds := strings.Split(cm["MAYFLY_REDIS_ADDRS"], ",")
	for _, s := range seeds {
		n := -1
		if m := seed.FindStringSubmatch(strings.TrimSpace(s)); m != nil {
			n, _ = strconv.Atoi(m[1])
		}
		if n < 0 || n >= v.Cluster.Nodes {
			t.Errorf("MAYFLY_REDIS_ADDRS seed %q is no pod of the chart's release redis-cluster (redis-cluster-N.redis-cluster-headless:6379, N < %d)", s, v.Cluster.Nodes)
		}
	}
	if len(seeds) < 2 {
		t.Errorf("MAYFLY_REDIS_ADDRS: %d seeds; one down would keep nodes from starting", len(seeds))
	}
}

// readmeRedisSettings are the lines of deploy/README.md's "Redis settings"
// block: setting → value.
func readmeRedisSettings(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repo, "deploy", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, sec, _ := strings.Cut(string(b), "\n## Redis settings\n")
	_, block, _ := strings.Cut(sec, "```\n")
	block, _, _ = strings.Cut(block, "```")
	out := map[string]string{}
	for line := range strings.Lines(block) {
		if f := strings.Fields(line); len(f) == 2 {
			out[f[0]] = f[1]
		}
	}
	if len(out) != 5 || out["maxmemory-policy"] != "noeviction" {
		t.Fatalf("deploy/README.md, Redis settings: found %v", out)
	}
	return out
}

// redisBytes parses a Redis memory value: bytes, or k/m/g (1000s) and
// kb/mb/gb (1024s), in any case.
func redisBytes(v string) (int64, error) {
	v = strings.ToLower(v)
	for _, u := range []struct {
		suffix string
		n      int64
	}{{"gb", 1 << 30}, {"mb", 1 << 20}, {"kb", 1 << 10}, {"g", 1e9}, {"m", 1e6}, {"k", 1e3}, {"", 1}} {
		if num, ok := strings.CutSuffix(v, u.suffix); ok {
			n, err := strconv.ParseInt(num, 10, 64)
			if err != nil {
				return 0, fmt.Errorf("%q: %w", v, err)
			}
			return n * u.n, nil
		}
	}
	return 0, fmt.Errorf("%q: no unit", v)
}
