// Command mayfly-inbox is the command-line tool of package clients/go/cli on
// its own, for `go install github.com/mayfly/mayfly/clients/go/cmd/mayfly-inbox@latest`
// without the server's dependencies. The mayfly binary has the same tool as
// `mayfly inbox`.
package main

import (
	"os"

	"github.com/mayfly/mayfly/clients/go/cli"
)

func main() {
	os.Exit(cli.Main("mayfly-inbox", os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}
