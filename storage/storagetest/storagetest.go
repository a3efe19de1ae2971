// Package storagetest connects tests to the Redis Cluster (or standalone
// Redis) named by MAYFLY_TEST_REDIS_ADDRS (with a password and TLS when
// MAYFLY_TEST_REDIS_PASSWORD and MAYFLY_TEST_REDIS_TLS_CA_FILE say so) and gives each test a key prefix of
// its own, so the tests of every package share one cluster in parallel and
// clean up after themselves without FLUSHALL.
//
// A missing or unreachable Redis fails the test; it never skips it, so a
// green run always means the Redis-backed code was exercised. `make test`
// starts a throwaway cluster and sets the variable.
//
// storagetest deliberately knows nothing about Mayfly's key scheme: it only
// deals in key prefixes.
package storagetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
)

// EnvAddrs names the environment variable holding the comma-separated
// host:port list of the Redis used by tests.
const EnvAddrs = "MAYFLY_TEST_REDIS_ADDRS"

// timeout bounds every Redis call the helpers make, so a wedged server fails
// the test instead of hanging it until go test's global timeout.
const timeout = 30 * time.Second

// Addrs returns the addresses in MAYFLY_TEST_REDIS_ADDRS and fails the test
// when it is unset or empty.
func Addrs(t testing.TB) []string {
	t.Helper()
	addrs, err := addrsFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	return addrs
}

func addrsFromEnv() ([]string, error) {
	var addrs []string
	for a := range strings.SplitSeq(os.Getenv(EnvAddrs), ",") {
		if a = strings.TrimSpace(a); a != "" {
			addrs = append(addrs, a)
		}
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("storagetest: %s is not set: run the tests with `make test`, "+
			"or start a cluster with `make cluster-up` and set %s=$(deploy/cluster.sh addrs)", EnvAddrs, EnvAddrs)
	}
	return addrs, nil
}

// Client returns a new client connected to the test Redis; rueidis tells a
// cluster from a standalone server by itself. The client is closed when the
// test ends. A Redis that cannot be reached fails the test.
func Client(t testing.TB) rueidis.Client {
	t.Helper()
	c, err := newClient(Addrs(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func newClient(addrs []string) (rueidis.Client, error) {
	sec, err := securityFromEnv()
	if err != nil {
		return nil, err
	}
	c, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress:  addrs,
		DisableCache: true,
		Username:     sec.Username,
		Password:     sec.Password,
		TLSConfig:    sec.TLS,
	})
	if err != nil {
		return nil, fmt.Errorf("storagetest: connect to %s=%s: %w", EnvAddrs, strings.Join(addrs, ","), err)
	}
	return c, nil
}

// The helpers' own client outlives every test: a Prefix cleanup may run after
// the test's Client has been closed (cleanups run last-registered first).
var shared struct {
	once sync.Once
	c    rueidis.Client
	err  error
}

func sharedClient(t testing.TB) rueidis.Client {
	t.Helper()
	shared.once.Do(func() {
		addrs, err := addrsFromEnv()
		if err != nil {
			shared.err = err
			return
		}
		shared.c, shared.err = newClient(addrs)
	})
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.c
}

// Prefix returns a key prefix unique to this call, like "t1a2b3c4d", for the
// test to put at the start of every key it writes ("<prefix>:..."). When the
// test ends, every key starting with the prefix is deleted from every master.
func Prefix(t testing.TB) string {
	t.Helper()
	c := sharedClient(t)
	var b [4]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never returns an error.
	prefix := "t" + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		keys, err := scan(ctx, c, prefix)
		if err != nil {
			t.Errorf("storagetest: clean up prefix %s: %v", prefix, err)
			return
		}
		// One DEL per key: the keys live in many slots, and a multi-key DEL
		// across slots fails with CROSSSLOT on a cluster.
		cmds := make(rueidis.Commands, 0, len(keys))
		for _, k := range keys {
			cmds = append(cmds, c.B().Del().Key(k).Build())
		}
		for i, r := range c.DoMulti(ctx, cmds...) {
			if err := r.Error(); err != nil {
				t.Errorf("storagetest: clean up prefix %s: DEL %s: %v", prefix, keys[i], err)
				return
			}
		}
	})
	return prefix
}

// Leftovers returns, sorted, every key that still exists and starts with
// prefix, looking at every master. Tests use it to prove that a deletion or
// expiry removed all of a mailbox's keys.
func Leftovers(t testing.TB, prefix string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	keys, err := scan(ctx, sharedClient(t), prefix)
	if err != nil {
		t.Fatalf("storagetest: leftovers of %s: %v", prefix, err)
	}
	return keys
}

// scan returns, sorted and without duplicates, the keys starting with prefix
// on every master that c knows. Replicas are skipped: they may lag behind and
// report keys their master has already deleted.
func scan(ctx context.Context, c rueidis.Client, prefix string) ([]string, error) {
	match := globEscape(prefix) + "*"
	var keys []string
	for addr, node := range c.Nodes() {
		master, err := isMaster(ctx, node)
		if err != nil {
			return nil, fmt.Errorf("ROLE on %s: %w", addr, err)
		}
		if !master {
			continue
		}
		var cursor uint64
		for {
			e, err := node.Do(ctx, node.B().Scan().Cursor(cursor).Match(match).Count(1000).Build()).AsScanEntry()
			if err != nil {
				return nil, fmt.Errorf("SCAN on %s: %w", addr, err)
			}
			keys = append(keys, e.Elements...)
			if cursor = e.Cursor; cursor == 0 {
				break
			}
		}
	}
	slices.Sort(keys)
	return slices.Compact(keys), nil
}

func isMaster(ctx context.Context, node rueidis.Client) (bool, error) {
	role, err := node.Do(ctx, node.B().Role().Build()).ToArray()
	if err != nil {
		return false, err
	}
	if len(role) == 0 {
		return false, fmt.Errorf("empty ROLE reply")
	}
	r, err := role[0].ToString()
	if err != nil {
		return false, err
	}
	return r == "master", nil
}

// globEscape quotes the characters SCAN MATCH treats as pattern syntax, so a
// prefix matches only itself.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
