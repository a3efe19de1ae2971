// Command gencerts writes a throwaway CA and a certificate for 127.0.0.1
// and localhost into a directory, as deploy/cluster.sh's
// MAYFLY_CLUSTER_TLS_DIR wants them: go run ./storage/storagetest/gencerts DIR.
// For local test clusters only.
package main

import (
	"fmt"
	"os"

	"github.com/mayfly/mayfly/storage/storagetest"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: gencerts DIR")
		os.Exit(2)
	}
	if err := os.MkdirAll(os.Args[1], 0o700); err != nil {
		fmt.Fprintln(os.Stderr, "gencerts:", err)
		os.Exit(1)
	}
	if _, err := storagetest.WriteCerts(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "gencerts:", err)
		os.Exit(1)
	}
}
