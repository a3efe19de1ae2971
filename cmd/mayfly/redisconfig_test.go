package main

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mayfly/mayfly/storage"
	"github.com/mayfly/mayfly/storage/storagetest"
	"github.com/redis/rueidis"
)

// The test cluster is started by deploy/cluster.sh, which applies
// deploy/lib.sh's redis_memory_args: a node finds nothing to warn about.
func TestRedisSettingsOfOurClusterPass(t *testing.T) {
	var logs bytes.Buffer
	n := checkRedisSettings(t.Context(), storagetest.Client(t), slog.New(slog.NewJSONHandler(&logs, nil)))
	if n != 0 {
		t.Fatalf("%d warnings on the cluster deploy/cluster.sh started:\n%s", n, logs.String())
	}
}

// A Redis with its own defaults gets one warning per setting that differs,
// naming the node, the setting and both values.
func TestRedisSettingsWarnWhenTheyDiffer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	addr := "127.0.0.1:" + strconv.Itoa(port)
	cmd := exec.Command("redis-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", t.TempDir(), "--maxmemory-policy", "allkeys-lru")
	if err := cmd.Start(); err != nil {
		t.Fatalf("redis-server: %v", err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	var client rueidis.Client
	for deadline := time.Now().Add(10 * time.Second); ; {
		if client, err = rueidis.NewClient(storage.ClientOption([]string{addr}, 2*time.Second)); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis-server on %s: %v", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	defer client.Close()
	// One setting as Mayfly wants it: no warning for it.
	if err := client.Do(context.Background(), client.B().ConfigSet().ParameterValue().ParameterValue("hash-max-listpack-entries", "48").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	n := checkRedisSettings(t.Context(), client, slog.New(slog.NewJSONHandler(&logs, nil)))
	if n != 3 {
		t.Errorf("%d warnings, want 3:\n%s", n, logs.String())
	}
	for _, want := range []string{
		`"setting":"hash-max-listpack-value","have":"64","want":"4096"`,
		`"setting":"stream-node-max-bytes","have":"4096","want":"256"`,
		`"setting":"maxmemory-policy","have":"allkeys-lru","want":"noeviction"`,
		`"node":"` + addr + `"`,
	} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("warnings lack %s:\n%s", want, logs.String())
		}
	}
	if strings.Contains(logs.String(), `"setting":"hash-max-listpack-entries"`) {
		t.Errorf("warned about a setting that matches:\n%s", logs.String())
	}
}
