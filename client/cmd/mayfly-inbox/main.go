// Command mayfly-inbox is the command-line tool of package client/cli on
// its own, for `go install github.com/mayfly/mayfly/client/cmd/mayfly-inbox@latest`
// without the server's dependencies. The mayfly binary has the same tool as
// `mayfly inbox`.
package main

import (
	"os"

	"github.com/mayfly/mayfly/client/cli"
)

func main() {
	os.Exit(cli.Main("mayfly-inbox", os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}
