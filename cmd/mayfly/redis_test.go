package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mayfly/mayfly/storage"
	"github.com/mayfly/mayfly/storage/storagetest"
	"github.com/redis/rueidis"
)

// managedCluster is a throwaway Redis Cluster shaped like a managed Redis:
// every node requires a password and speaks only TLS, on its client port,
// its cluster bus and its replication link. deploy/cluster.sh starts it
// with certificates made by the test.
type managedCluster struct {
	addrs    []string
	certs    storagetest.Certs
	password string
}

func startManagedCluster(t *testing.T, replicas int) managedCluster {
	t.Helper()
	c := managedCluster{
		certs: storagetest.NewCerts(t),
		// Quotes, a backslash and a space: the password must survive redis.conf,
		// REDISCLI_AUTH and the _FILE setting unchanged.
		password: fmt.Sprintf(`pw "%d" \x y`, time.Now().UnixNano()),
	}
	env := append(os.Environ(),
		"MAYFLY_CLUSTER_DIR="+filepath.Join(t.TempDir(), "cluster"),
		"MAYFLY_CLUSTER_TLS_DIR="+c.certs.Dir,
		"MAYFLY_CLUSTER_PASSWORD="+c.password,
		// Frequent pings: replicas reach CLUSTER SLOTS once gossip reports
		// their replication offset.
		"MAYFLY_CLUSTER_NODE_TIMEOUT=1000",
		fmt.Sprintf("MAYFLY_CLUSTER_REPLICAS=%d", replicas))
	script := filepath.Join("..", "..", "deploy", "cluster.sh")
	t.Cleanup(func() {
		down := exec.Command("bash", script, "down")
		down.Env = env
		if out, err := down.CombinedOutput(); err != nil {
			t.Errorf("cluster.sh down: %v\n%s", err, out)
		}
	})
	up := exec.Command("bash", script, "up")
	up.Env = env
	var stderr strings.Builder
	up.Stderr = &stderr
	out, err := up.Output()
	if err != nil {
		t.Fatalf("cluster.sh up (TLS, password): %v\n%s", err, stderr.String())
	}
	c.addrs = strings.Split(strings.TrimSpace(string(out)), ",")
	return c
}

// TestManagedRedis runs the whole stack against a cluster that requires a
// password and TLS, and checks that a node with wrong credentials or an
// untrusted certificate refuses to start, with a message naming the
// settings to check and without the password anywhere in its output.
func TestManagedRedis(t *testing.T) {
	t.Parallel()
	start := time.Now()
	c := startManagedCluster(t, 1)
	t.Logf("TLS cluster with password (3 primaries, 3 replicas) up in %v", time.Since(start).Round(time.Millisecond))

	pwFile := filepath.Join(t.TempDir(), "redis-password")
	if err := os.WriteFile(pwFile, []byte(c.password+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	secure := func(extra map[string]string) map[string]string {
		env := map[string]string{
			// One seed: the other primaries and the replicas are found
			// through CLUSTER SLOTS and must be reached with TLS and AUTH too.
			"MAYFLY_REDIS_ADDRS":       c.addrs[0],
			"MAYFLY_REDIS_USERNAME":    "default",
			"MAYFLY_REDIS_PASSWORD":    c.password,
			"MAYFLY_REDIS_TLS":         "true",
			"MAYFLY_REDIS_TLS_CA_FILE": c.certs.CA,
		}
		for k, v := range extra {
			if v == "" {
				delete(env, k)
			} else {
				env[k] = v
			}
		}
		return env
	}

	// A client built as the node builds its own. Redis 7.0 lists a replica
	// in CLUSTER SLOTS only once gossip reports a replication offset above
	// 0, which on an idle primary waits for its replication ping (every
	// 10 s by default): ping every second.
	opt := storage.ClientOption(c.addrs[:1], 2*time.Second)
	opt.Password, opt.TLSConfig = c.password, mustTLS(t, c.certs.CA)
	client, err := rueidis.NewClient(opt)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	for addr, node := range client.Nodes() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := node.Do(ctx, node.B().ConfigSet().ParameterValue().ParameterValue("repl-ping-replica-period", "1").Build()).Error()
		cancel()
		if err != nil {
			t.Fatalf("CONFIG SET on %s: %v", addr, err)
		}
	}

	t.Run("stack", func(t *testing.T) {
		start := time.Now()
		logs := runAllFlow(t, secure(map[string]string{
			"MAYFLY_REDIS_PASSWORD":      "",
			"MAYFLY_REDIS_PASSWORD_FILE": pwFile, // with its trailing newline
			// The node certificate doubles as a client certificate (mTLS).
			"MAYFLY_REDIS_TLS_CERT_FILE": c.certs.Cert,
			"MAYFLY_REDIS_TLS_KEY_FILE":  c.certs.Key,
		}))
		t.Logf("stack flow over TLS in %v", time.Since(start).Round(time.Millisecond))
		if strings.Contains(logs, c.password) || strings.Contains(logs, strings.Fields(c.password)[1]) {
			t.Error("the node logged the Redis password")
		}
		for _, want := range []string{`"password_set":true`, `"tls":true`, `"tls_client_cert":true`} {
			if !strings.Contains(logs, want) {
				t.Errorf("startup log lacks %s", want)
			}
		}
		// The replicas, found through CLUSTER SLOTS once gossip has told the
		// seed of them, take the same TLS and AUTH: a client built as the
		// node builds its own reaches all three and asks each its ROLE.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for replicas := 0; replicas != 3; {
			if ctx.Err() != nil {
				t.Fatalf("reached %d replicas over TLS in 10 s, want 3", replicas)
			}
			time.Sleep(100 * time.Millisecond)
			replicas = 0
			for addr, node := range client.Nodes() {
				role, err := node.Do(ctx, node.B().Role().Build()).ToArray()
				if err != nil {
					t.Fatalf("ROLE on %s: %v", addr, err)
				}
				if r, _ := role[0].ToString(); r == "slave" {
					replicas++
				}
			}
		}
		t.Logf("3 replicas reached over TLS %v after the flow", time.Since(start).Round(time.Millisecond))
	})

	other := storagetest.NewCerts(t) // a CA that did not sign the cluster's certificates
	// A server that answers in plaintext, as a Redis without TLS would.
	plain, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { plain.Close() }) // after the parallel subtests
	go func() {
		for {
			conn, err := plain.Accept()
			if err != nil {
				return
			}
			conn.Write([]byte("-ERR unknown command\r\n"))
			conn.Close()
		}
	}()
	refusals := []struct {
		name    string
		env     map[string]string
		wantErr string
	}{
		{"wrong password", map[string]string{"MAYFLY_REDIS_PASSWORD": "not-" + c.password}, "WRONGPASS"},
		{"no password", map[string]string{"MAYFLY_REDIS_USERNAME": "", "MAYFLY_REDIS_PASSWORD": ""}, "NOAUTH"},
		{"certificate from another CA", map[string]string{"MAYFLY_REDIS_TLS_CA_FILE": other.CA}, "certificate signed by unknown authority"},
		{"server name not in the certificate", map[string]string{"MAYFLY_REDIS_TLS_SERVER_NAME": "redis.example"}, "not redis.example"},
		{"TLS to a plaintext port", map[string]string{"MAYFLY_REDIS_ADDRS": plain.Addr().String()}, "does not speak TLS"},
	}
	// A plaintext client is reset by a TLS-only port. That is retried (a
	// Redis restarting looks the same), with a hint in the log.
	t.Run("plaintext to a TLS port", func(t *testing.T) {
		t.Parallel()
		env := secure(map[string]string{"MAYFLY_REDIS_TLS": "false", "MAYFLY_REDIS_TLS_CA_FILE": ""})
		env["MAYFLY_HTTP_ADDR"], env["MAYFLY_SMTP_ADDR"], env["MAYFLY_ADMIN_ADDR"] = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		var logs strings.Builder
		if err := run(ctx, []string{"all"}, environ(env), io.Discard, &logs); err == nil {
			t.Fatal("run succeeded in plaintext against a TLS-only cluster")
		}
		if !strings.Contains(logs.String(), "MAYFLY_REDIS_TLS=true") {
			t.Errorf("the retries give no TLS hint:\n%s", logs.String())
		}
		if strings.Contains(logs.String(), c.password) {
			t.Error("the Redis password appears in the node's output")
		}
	})
	for _, tc := range refusals {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env := secure(tc.env)
			env["MAYFLY_HTTP_ADDR"], env["MAYFLY_SMTP_ADDR"], env["MAYFLY_ADMIN_ADDR"] = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			var logs strings.Builder
			start := time.Now()
			err := run(ctx, []string{"all"}, environ(env), io.Discard, &logs)
			if err == nil || ctx.Err() != nil {
				t.Fatalf("run = %v after %v, want a prompt refusal", err, time.Since(start))
			}
			if !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "MAYFLY_REDIS_") {
				t.Errorf("run error = %q, want one containing %q and naming the settings to check", err, tc.wantErr)
			}
			if strings.Contains(logs.String(), `"kind":"http"`) || strings.Contains(logs.String(), `"kind":"smtp"`) {
				t.Error("the node served HTTP or SMTP without a usable Redis")
			}
			if out := logs.String() + err.Error(); strings.Contains(out, c.password) {
				t.Error("the Redis password appears in the node's output")
			}
		})
	}
}

func mustTLS(t *testing.T, ca string) *tls.Config {
	t.Helper()
	cfg, err := storagetest.TLSConfig(ca)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestLoadConfigRedisSecurity covers the AUTH and TLS settings' parsing and
// their errors, and that no formatting of the config shows the password.
func TestLoadConfigRedisSecurity(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	certs := storagetest.NewCerts(t)
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	pwNewline := write("pw", "hunter2 \n")
	pwEmpty := write("empty", "\n")
	notPEM := write("ca.txt", "not a certificate\n")
	tests := []struct {
		name    string
		env     map[string]string
		wantErr string // "" for success
		check   func(t *testing.T, r redisSecurity)
	}{
		{name: "defaults: no AUTH, no TLS", check: func(t *testing.T, r redisSecurity) {
			if r.username != "" || r.password.reveal() != "" || r.tls != nil {
				t.Errorf("got %+v, want no credentials and no TLS", r)
			}
		}},
		{name: "password kept as given", env: map[string]string{"MAYFLY_REDIS_PASSWORD": " p w "},
			check: func(t *testing.T, r redisSecurity) {
				if got, want := r.password.reveal(), " p w "; got != want {
					t.Errorf("password = %q, want %q", got, want)
				}
			}},
		{name: "password file: trailing newline trimmed, spaces kept", env: map[string]string{"MAYFLY_REDIS_PASSWORD_FILE": pwNewline, "MAYFLY_REDIS_USERNAME": "mayfly"},
			check: func(t *testing.T, r redisSecurity) {
				if got, want := r.password.reveal(), "hunter2 "; got != want {
					t.Errorf("password = %q, want %q", got, want)
				}
				if got, want := r.username, "mayfly"; got != want {
					t.Errorf("username = %q, want %q", got, want)
				}
			}},
		{name: "TLS with system roots", env: map[string]string{"MAYFLY_REDIS_TLS": "true"},
			check: func(t *testing.T, r redisSecurity) {
				if r.tls == nil || r.tls.RootCAs != nil || r.tls.ServerName != "" || r.tls.MinVersion != tls.VersionTLS12 {
					t.Errorf("tls = %+v, want system roots, no fixed server name, TLS 1.2+", r.tls)
				}
			}},
		{name: "TLS with CA, server name and client certificate", env: map[string]string{"MAYFLY_REDIS_TLS": "true",
			"MAYFLY_REDIS_TLS_CA_FILE": certs.CA, "MAYFLY_REDIS_TLS_SERVER_NAME": "redis.internal",
			"MAYFLY_REDIS_TLS_CERT_FILE": certs.Cert, "MAYFLY_REDIS_TLS_KEY_FILE": certs.Key},
			check: func(t *testing.T, r redisSecurity) {
				if r.tls == nil || r.tls.RootCAs == nil || r.tls.ServerName != "redis.internal" || len(r.tls.Certificates) != 1 {
					t.Errorf("tls = %+v, want the CA, the server name and one client certificate", r.tls)
				}
			}},
		{name: "both password forms", env: map[string]string{"MAYFLY_REDIS_PASSWORD": "a", "MAYFLY_REDIS_PASSWORD_FILE": pwNewline},
			wantErr: "MAYFLY_REDIS_PASSWORD_FILE: set either MAYFLY_REDIS_PASSWORD or MAYFLY_REDIS_PASSWORD_FILE, not both"},
		{name: "password file missing", env: map[string]string{"MAYFLY_REDIS_PASSWORD_FILE": filepath.Join(dir, "nope")},
			wantErr: "MAYFLY_REDIS_PASSWORD_FILE: open " + filepath.Join(dir, "nope")},
		{name: "password file empty", env: map[string]string{"MAYFLY_REDIS_PASSWORD_FILE": pwEmpty},
			wantErr: "MAYFLY_REDIS_PASSWORD_FILE: " + pwEmpty + " is empty"},
		{name: "username without password", env: map[string]string{"MAYFLY_REDIS_USERNAME": "mayfly"},
			wantErr: "MAYFLY_REDIS_USERNAME: needs MAYFLY_REDIS_PASSWORD"},
		{name: "CA without TLS", env: map[string]string{"MAYFLY_REDIS_TLS_CA_FILE": certs.CA},
			wantErr: "MAYFLY_REDIS_TLS_CA_FILE: needs MAYFLY_REDIS_TLS=true"},
		{name: "TLS not a boolean", env: map[string]string{"MAYFLY_REDIS_TLS": "yes please"},
			wantErr: "MAYFLY_REDIS_TLS: must be true or false"},
		{name: "CA file missing", env: map[string]string{"MAYFLY_REDIS_TLS": "true", "MAYFLY_REDIS_TLS_CA_FILE": filepath.Join(dir, "nope.pem")},
			wantErr: "MAYFLY_REDIS_TLS_CA_FILE: open " + filepath.Join(dir, "nope.pem")},
		{name: "CA file not PEM", env: map[string]string{"MAYFLY_REDIS_TLS": "true", "MAYFLY_REDIS_TLS_CA_FILE": notPEM},
			wantErr: "MAYFLY_REDIS_TLS_CA_FILE: " + notPEM + " holds no PEM certificate"},
		{name: "client certificate without key", env: map[string]string{"MAYFLY_REDIS_TLS": "true", "MAYFLY_REDIS_TLS_CERT_FILE": certs.Cert},
			wantErr: "must be set together"},
		{name: "client key not matching", env: map[string]string{"MAYFLY_REDIS_TLS": "true", "MAYFLY_REDIS_TLS_CERT_FILE": certs.Cert, "MAYFLY_REDIS_TLS_KEY_FILE": notPEM},
			wantErr: "MAYFLY_REDIS_TLS_CERT_FILE: tls: "},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, ok := configCase(t, tc.env, tc.wantErr)
			if !ok {
				return
			}
			tc.check(t, c.redis)
		})
	}

	t.Run("the password is never formatted", func(t *testing.T) {
		const pw = "correct horse battery staple"
		c, err := loadConfig(func(k string) string { return map[string]string{"MAYFLY_REDIS_PASSWORD": pw}[k] })
		if err != nil {
			t.Fatal(err)
		}
		var logged strings.Builder
		slog.New(slog.NewJSONHandler(&logged, nil)).Info("config", "cfg", c, "redis", c.redis, "pw", c.redis.password)
		slog.New(slog.NewTextHandler(&logged, nil)).Info("config", "cfg", c, "redis", c.redis, "pw", c.redis.password)
		out := fmt.Sprintf("%v %+v %#v %s %v %+v %#v", c, c, c, c.redis.password, c.redis, c.redis, c.redis.password) + logged.String()
		if strings.Contains(out, pw) {
			t.Errorf("the password appears in a formatted config: %s", out)
		}
	})
}

// TestLoadConfigReplicaTimeout: a replica timeout under a millisecond would
// become WAIT n 0, which blocks until the replicas answer however long that
// takes; one at or above MAYFLY_REDIS_TIMEOUT would outlast the connection's
// own timeout, which ends the connection. Both are refused at start.
func TestLoadConfigReplicaTimeout(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		env     map[string]string
		wantErr string
	}{
		{env: map[string]string{"MAYFLY_REDIS_REPLICA_TIMEOUT": "500us"},
			wantErr: "MAYFLY_REDIS_REPLICA_TIMEOUT: 500µs is under 1ms"},
		{env: map[string]string{"MAYFLY_REDIS_REPLICA_TIMEOUT": "2s"},
			wantErr: "MAYFLY_REDIS_REPLICA_TIMEOUT: 2s must be below MAYFLY_REDIS_TIMEOUT (2s)"},
		{env: map[string]string{"MAYFLY_REDIS_REPLICA_TIMEOUT": "300ms", "MAYFLY_REDIS_TIMEOUT": "250ms"},
			wantErr: "MAYFLY_REDIS_REPLICA_TIMEOUT: 300ms must be below MAYFLY_REDIS_TIMEOUT (250ms)"},
		{env: map[string]string{"MAYFLY_REDIS_REPLICA_TIMEOUT": "1ms"}},
		{env: map[string]string{"MAYFLY_REDIS_REPLICA_TIMEOUT": "2s", "MAYFLY_REDIS_TIMEOUT": "3s"}},
	} {
		t.Run(fmt.Sprint(tc.env), func(t *testing.T) {
			configCase(t, tc.env, tc.wantErr)
		})
	}
}
