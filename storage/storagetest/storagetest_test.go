package storagetest

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/redis/rueidis"
)

// writeKeys writes n plain keys plus one key of each of the other types the
// storage uses under prefix, and returns their names sorted. n plain keys
// spread over many slots, so over every master of the cluster.
func writeKeys(t *testing.T, c rueidis.Client, prefix string, n int) []string {
	t.Helper()
	ctx := context.Background()
	var keys []string
	var cmds rueidis.Commands
	for i := range n {
		k := fmt.Sprintf("%s:k%d", prefix, i)
		keys = append(keys, k)
		cmds = append(cmds, c.B().Set().Key(k).Value("v").Build())
	}
	h, z, s := prefix+":{tag}:hash", prefix+":{tag}:zset", prefix+":{tag}:stream"
	keys = append(keys, h, z, s)
	cmds = append(cmds,
		c.B().Hset().Key(h).FieldValue().FieldValue("f", "v").Build(),
		c.B().Zadd().Key(z).ScoreMember().ScoreMember(1, "m").Build(),
		c.B().Xadd().Key(s).Id("*").FieldValue().FieldValue("f", "v").Build(),
	)
	for _, r := range c.DoMulti(ctx, cmds...) {
		if err := r.Error(); err != nil {
			t.Fatalf("write keys: %v", err)
		}
	}
	slices.Sort(keys)
	return keys
}

// keysPerMaster counts, for every master, the keys under prefix it holds.
func keysPerMaster(t *testing.T, prefix string) map[string]int {
	t.Helper()
	ctx := context.Background()
	c := sharedClient(t)
	counts := map[string]int{}
	for addr, node := range c.Nodes() {
		master, err := isMaster(ctx, node)
		if err != nil {
			t.Fatal(err)
		}
		if !master {
			continue
		}
		keys, err := scan(ctx, node, prefix)
		if err != nil {
			t.Fatal(err)
		}
		counts[addr] = len(keys)
	}
	return counts
}

func TestClientReachesCluster(t *testing.T) {
	t.Parallel()
	c := Client(t)
	got, err := c.Do(context.Background(), c.B().Ping().Build()).ToString()
	if err != nil {
		t.Fatalf("PING: %v", err)
	}
	if want := "PONG"; got != want {
		t.Fatalf("PING = %q, want %q", got, want)
	}
	// make test always runs against a cluster: a standalone server would
	// hide CROSSSLOT errors from every package's tests.
	if got, want := c.Mode(), rueidis.ClientModeCluster; got != want {
		t.Fatalf("Mode() = %v, want %v (is %s a cluster?)", got, want, EnvAddrs)
	}
}

func TestPrefixCleanupDeletesKeysOnEveryMaster(t *testing.T) {
	t.Parallel()
	var prefix string
	var written []string
	t.Run("writer", func(st *testing.T) {
		// Prefix before Client: the test's client is closed before the
		// prefix's cleanup runs, which must not stop the cleanup.
		prefix = Prefix(st)
		written = writeKeys(st, Client(st), prefix, 64)
		counts := keysPerMaster(st, prefix)
		if got, want := len(counts), 3; got < want {
			st.Fatalf("cluster has %d masters, want at least %d", got, want)
		}
		for addr, n := range counts {
			if n == 0 {
				st.Fatalf("master %s holds none of the %d keys; want keys on every master: %v", addr, len(written), counts)
			}
		}
		if got, want := Leftovers(st, prefix), written; !slices.Equal(got, want) {
			st.Fatalf("Leftovers before cleanup = %v, want %v", got, want)
		}
	})
	if got := Leftovers(t, prefix); len(got) != 0 {
		t.Fatalf("Leftovers after cleanup = %v, want none", got)
	}
}

func TestLeftovers(t *testing.T) {
	t.Parallel()
	c := Client(t)
	prefix := Prefix(t)
	other := Prefix(t)
	keys := writeKeys(t, c, prefix, 32)
	writeKeys(t, c, other, 4)
	literal := []string{prefix + ":[ab]", prefix + ":a*"}
	for _, k := range append(literal, prefix+":a", prefix+":b", prefix+":ab") {
		if err := c.Do(context.Background(), c.B().Set().Key(k).Value("v").Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}

	tests := []struct {
		name   string
		prefix string
		want   []string
	}{
		{"plain keys", prefix + ":k", keysWithPrefix(keys, prefix+":k")},
		{"hash-tagged keys", prefix + ":{tag}:", keysWithPrefix(keys, prefix+":{tag}:")},
		{"brackets are literal", prefix + ":[ab]", []string{prefix + ":[ab]"}},
		{"star is literal", prefix + ":a*", []string{prefix + ":a*"}},
		{"unknown prefix", prefix + ":nothing", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Leftovers(t, tt.prefix); !slices.Equal(got, tt.want) {
				t.Fatalf("Leftovers(%q) = %v, want %v", tt.prefix, got, tt.want)
			}
		})
	}
}

func keysWithPrefix(keys []string, prefix string) []string {
	var out []string
	for _, k := range keys {
		if strings.HasPrefix(k, prefix) {
			out = append(out, k)
		}
	}
	return out
}

func TestPrefixIsUnique(t *testing.T) {
	t.Parallel()
	format := regexp.MustCompile(`^t[0-9a-f]{8}$`)
	seen := map[string]bool{}
	for range 100 {
		p := Prefix(t)
		if !format.MatchString(p) {
			t.Fatalf("Prefix() = %q, want it to match %s", p, format)
		}
		if seen[p] {
			t.Fatalf("Prefix() returned %q twice", p)
		}
		seen[p] = true
	}
}

func TestAddrsFromEnv(t *testing.T) {
	tests := []struct {
		env     string
		want    []string
		wantErr bool
	}{
		{env: "", wantErr: true},
		{env: " , ", wantErr: true},
		{env: "127.0.0.1:7000", want: []string{"127.0.0.1:7000"}},
		{env: " 127.0.0.1:7000, 127.0.0.1:7001 ,", want: []string{"127.0.0.1:7000", "127.0.0.1:7001"}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%q", tt.env), func(t *testing.T) {
			t.Setenv(EnvAddrs, tt.env)
			got, err := addrsFromEnv()
			if tt.wantErr {
				// The message is what a developer who ran plain `go test`
				// sees: it must say how to get a Redis.
				if err == nil || !strings.Contains(err.Error(), "make test") {
					t.Fatalf("addrsFromEnv() = %v, %v; want an error mentioning make test", got, err)
				}
				return
			}
			if err != nil || !slices.Equal(got, tt.want) {
				t.Fatalf("addrsFromEnv() = %v, %v; want %v, nil", got, err, tt.want)
			}
		})
	}
}

// A node's view counts only replicas that name their primary, and any
// failing flag means the view is not settled yet.
func TestRolesKnown(t *testing.T) {
	const (
		primary  = "aaa 127.0.0.1:1@11 myself,master - 0 0 1 connected 0-8191\n"
		primary2 = "bbb 127.0.0.1:2@12 master - 0 0 2 connected 8192-16383\n"
		replica  = "ccc 127.0.0.1:3@13 slave aaa 0 0 1 connected\n"
		joining  = "ddd 127.0.0.1:4@14 master - 0 0 0 connected\n" // CLUSTER REPLICATE not yet gossiped
		replica2 = "ddd 127.0.0.1:4@14 slave bbb 0 0 2 connected\n"
		pfail    = "ddd 127.0.0.1:4@14 slave,fail? bbb 0 0 2 connected\n"
	)
	for _, c := range []struct {
		nodes string
		n     int
		want  bool
	}{
		{primary + primary2 + replica + replica2, 2, true},
		{primary + primary2 + replica + joining, 2, false},
		{primary + primary2 + replica + pfail, 2, false},
		{primary + primary2 + replica, 1, true},
		{primary + primary2 + replica + replica2, 1, false},
	} {
		if got := rolesKnown(c.nodes, c.n); got != c.want {
			t.Errorf("rolesKnown(%q, %d) = %v, want %v", c.nodes, c.n, got, c.want)
		}
	}
}
