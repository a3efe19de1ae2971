// Command mayfly, from the client module, is Mayfly's command-line tool on
// its own, without the server's dependencies:
//
//	go install github.com/mayfly/mayfly/clients/go/cmd/mayfly@latest
//	mayfly inbox new
//
// It is invoked as the server's binary is, `mayfly inbox …` (package
// clients/go/cli), and has only that command: the server itself is
// github.com/mayfly/mayfly/cmd/mayfly, whose binary has `inbox` too.
package main

import (
	"fmt"
	"os"

	"github.com/mayfly/mayfly/clients/go/cli"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "inbox" {
		os.Exit(cli.Main("mayfly inbox", os.Args[2:], os.Getenv, os.Stdout, os.Stderr))
	}
	if len(os.Args) > 1 && os.Args[1] == "version" {
		fmt.Println("mayfly", cli.Version())
		return
	}
	fmt.Fprintf(os.Stderr, "usage: mayfly inbox <command> [flags]   (mayfly inbox --help)\n"+
		"This mayfly is the client tool alone; the server is github.com/mayfly/mayfly/cmd/mayfly.\n")
	os.Exit(cli.ExitUsage)
}
