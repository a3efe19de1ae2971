package check

import (
	"bytes"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

// composeFile is the part of the Compose format deploy/compose/compose.yaml
// uses, in the shape `docker-compose config` writes it (and the file is
// written in). Decoding strictly refuses any other field: one added to the
// file gets its field here, and its check.
type composeFile struct {
	Version  string                    `json:"version"` // docker-compose 1.x's config adds it
	Services map[string]composeService `json:"services"`
	Networks map[string]struct {
		IPAM struct {
			Config []struct {
				Subnet string `json:"subnet"`
			} `json:"config"`
		} `json:"ipam"`
	} `json:"networks"`
	Volumes map[string]struct{} `json:"volumes"`
}

type composeService struct {
	Image       string            `json:"image"`
	Command     []string          `json:"command"`
	Environment map[string]string `json:"environment"`
	Ports       []string          `json:"ports"`
	Volumes     []string          `json:"volumes"`
	Healthcheck *struct {
		Test     []string `json:"test"`
		Interval string   `json:"interval"`
		Timeout  string   `json:"timeout"`
		Retries  int      `json:"retries"`
	} `json:"healthcheck"`
	DependsOn map[string]struct {
		Condition string `json:"condition"`
	} `json:"depends_on"`
	Networks map[string]*struct {
		IPv4Address string `json:"ipv4_address"`
	} `json:"networks"`
	Profiles        []string `json:"profiles"`
	ReadOnly        bool     `json:"read_only"`
	StopGracePeriod string   `json:"stop_grace_period"`
	Restart         string   `json:"restart"`
}

var composePath = filepath.Join(repo, "deploy", "compose", "compose.yaml")

// renderCompose is compose.yaml as Compose reads it: `docker-compose config`
// (Debian's docker-compose; install-deps.sh --checks installs it), which
// validates the file against the Compose schema offline, without a Docker
// engine, and interpolates ${VAR:-default} with the defaults (BIND_ADDR and
// the rest unset). Without it, under CI the test fails; elsewhere it checks
// the file itself, its defaults interpolated here.
func renderCompose(t *testing.T) []byte {
	t.Helper()
	bin, err := exec.LookPath("docker-compose")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("docker-compose is not installed (deploy/install-deps.sh --checks)")
		}
		t.Log("docker-compose is not installed: checking compose.yaml without Compose's schema")
		b, err := os.ReadFile(composePath)
		if err != nil {
			t.Fatal(err)
		}
		return regexp.MustCompile(`\$\{[A-Z_]+:-([^}]*)\}`).ReplaceAll(b, []byte("$1"))
	}
	cmd := exec.Command(bin, "-f", composePath, "config")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("docker-compose config: %v\n%s", err, stderr.String())
	}
	return out
}

func TestCompose(t *testing.T) {
	var f composeFile
	if err := yaml.UnmarshalStrict(renderCompose(t), &f); err != nil {
		t.Fatalf("compose.yaml: %v", err)
	}
	raw, err := os.ReadFile(composePath)
	if err != nil {
		t.Fatal(err)
	}
	redis, ok := f.Services["redis"]
	if !ok || len(redis.Command) == 0 || redis.Command[0] != "redis-server" {
		t.Fatalf("no service redis running redis-server: %+v", redis)
	}
	mayfly, ok := f.Services["mayfly"]
	if !ok {
		t.Fatal("no service mayfly")
	}

	t.Run("redis settings", func(t *testing.T) {
		args := map[string]string{}
		for i := 1; i+1 < len(redis.Command); i += 2 {
			args[strings.TrimPrefix(redis.Command[i], "--")] = redis.Command[i+1]
		}
		for key, want := range readmeRedisSettings(t) {
			if key == "maxmemory" {
				if n, err := redisBytes(args[key]); err != nil || n <= 0 {
					t.Errorf("redis: maxmemory %q, want a limit below the box's memory", args[key])
				}
				continue
			}
			if args[key] != want {
				t.Errorf("redis: --%s %q, want %q (deploy/README.md, Redis settings)", key, args[key], want)
			}
		}
		if redis.Healthcheck == nil || !slices.Contains(redis.Healthcheck.Test, "ping") {
			t.Error("redis: no healthcheck for mayfly to wait on")
		}
		if err := pinnedImage(redis.Image); err != nil {
			t.Errorf("redis: %v", err)
		}
	})

	t.Run("mayfly all", func(t *testing.T) {
		if !slices.Equal(mayfly.Command, []string{"all"}) {
			t.Errorf("mayfly: command %v, want [all]", mayfly.Command)
		}
		if want := resolveImage("mayfly", load(t, base).images); mayfly.Image != want {
			t.Errorf("mayfly: image %s, want the release the base pins, %s", mayfly.Image, want)
		}
		known := settings(t)
		for key := range mayfly.Environment {
			if !known[key] {
				t.Errorf("mayfly: %s is no Mayfly setting (a node refuses unknown MAYFLY_* names)", key)
			}
		}
		if got := mayfly.Environment["MAYFLY_REDIS_ADDRS"]; got != "redis:6379" {
			t.Errorf("MAYFLY_REDIS_ADDRS %q, want the service redis, redis:6379", got)
		}
		if mayfly.DependsOn["redis"].Condition != "service_healthy" {
			t.Error("mayfly: does not wait for redis to be healthy (a node refuses to start without Redis)")
		}
		grace, err := time.ParseDuration(mayfly.StopGracePeriod)
		drain, shutdown := setting(t, mayfly.Environment, "MAYFLY_DRAIN_DELAY"), setting(t, mayfly.Environment, "MAYFLY_SHUTDOWN_TIMEOUT")
		if err != nil || grace < drain+shutdown {
			t.Errorf("mayfly: stop_grace_period %q, want at least MAYFLY_DRAIN_DELAY + MAYFLY_SHUTDOWN_TIMEOUT (%v)", mayfly.StopGracePeriod, drain+shutdown)
		}
	})

	t.Run("ports", func(t *testing.T) {
		published := map[string]string{} // container port → host address
		for _, p := range mayfly.Ports {
			parts := strings.Split(strings.TrimSuffix(p, "/tcp"), ":")
			if len(parts) != 3 {
				t.Errorf("mayfly: port %q publishes on every address of the box", p)
				continue
			}
			published[parts[2]] = parts[0]
		}
		for _, port := range []string{"8080", "2525", "9090"} {
			if got := published[port]; got != "127.0.0.1" {
				t.Errorf("mayfly: port %s published on %q by default, want 127.0.0.1", port, got)
			}
		}
		// Cookies without Secure only where the API is plain HTTP, on the
		// box itself, and the file says so.
		if mayfly.Environment["MAYFLY_COOKIE_SECURE"] == "false" &&
			(published["8080"] != "127.0.0.1" || !strings.Contains(string(raw), "plain HTTP")) {
			t.Error("MAYFLY_COOKIE_SECURE=false without a plain-HTTP API on 127.0.0.1 documented in compose.yaml")
		}
	})

	t.Run("readiness", func(t *testing.T) {
		// The image is distroless: no shell or client for a Compose
		// healthcheck. /readyz is asked on the admin port, by haproxy and by
		// the box (published on 127.0.0.1:9090).
		cfg, err := os.ReadFile(filepath.Join(repo, "deploy", "haproxy", "haproxy.cfg"))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(cfg), "option httpchk GET /readyz") {
			t.Error("haproxy.cfg no longer checks /readyz")
		}
		hp := f.Services["haproxy"]
		for key, v := range hp.Environment {
			if strings.HasSuffix(key, "_ADMIN") && v != "9090" {
				t.Errorf("haproxy: %s %q, want the node's admin port 9090", key, v)
			}
		}
	})

	t.Run("haproxy", func(t *testing.T) {
		hp, ok := f.Services["haproxy"]
		if !ok {
			t.Fatal("no service haproxy")
		}
		if !slices.Equal(hp.Profiles, []string{"haproxy"}) {
			t.Errorf("haproxy: profiles %v, want [haproxy] (optional)", hp.Profiles)
		}
		if err := pinnedImage(hp.Image); err != nil {
			t.Errorf("haproxy: %v", err)
		}
		// docker-compose config makes the source absolute; the file has it
		// relative to itself.
		if !slices.ContainsFunc(hp.Volumes, func(v string) bool {
			return strings.HasSuffix(v, "/deploy/haproxy:/usr/local/etc/haproxy:ro") || v == "../haproxy:/usr/local/etc/haproxy:ro"
		}) {
			t.Errorf("haproxy: volumes %v, want deploy/haproxy read-only at /usr/local/etc/haproxy", hp.Volumes)
		}
		for _, p := range hp.Ports {
			if !strings.HasPrefix(p, "127.0.0.1:") {
				t.Errorf("haproxy: port %q not on 127.0.0.1 by default", p)
			}
		}
		// The node trusts haproxy's address and nothing else.
		n := hp.Networks["mayfly"]
		if n == nil || n.IPv4Address == "" {
			t.Fatal("haproxy: no fixed address for the node to trust")
		}
		addr, err := netip.ParseAddr(n.IPv4Address)
		if err != nil {
			t.Fatal(err)
		}
		for _, key := range []string{"MAYFLY_TRUSTED_PROXIES", "MAYFLY_SMTP_PROXY_PROTOCOL_FROM"} {
			if got := mayfly.Environment[key]; got != addr.String() {
				t.Errorf("mayfly: %s %q, want haproxy's address %s only", key, got, addr)
			}
		}
		nets := f.Networks["mayfly"].IPAM.Config
		if len(nets) != 1 || !netip.MustParsePrefix(nets[0].Subnet).Contains(addr) {
			t.Errorf("network mayfly: %+v does not hold haproxy's %s", nets, addr)
		}
	})
}
