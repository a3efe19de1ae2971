// Command smtpload sends load to an SMTP server: N concurrent connections,
// M messages (or a duration), one message per connection or many with RSET
// between them, optionally paced to a steady rate. Connections come from a
// rotating range of loopback source addresses, so that a server's per-IP
// limits see many clients. It prints one JSON line: msgs/s, p50/p99 of what
// a sender waited for each message, and errors.
//
//	smtpload -addr 127.0.0.1:2525 -rcpts inboxes.txt -conns 32 -duration 5s -per-conn 1
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/mayfly/mayfly/bench/internal/load"
)

func main() {
	var l load.SMTPLoad
	rcptFile := flag.String("rcpts", "", "file of recipient addresses, one per line (first field of a line)")
	rcpt := flag.String("rcpt", "", "recipient addresses, comma separated (instead of -rcpts)")
	src := flag.String("src", "127.1.0.0/16", "loopback CIDR to take source addresses from (empty: do not bind)")
	flag.StringVar(&l.Addr, "addr", "127.0.0.1:2525", "SMTP server")
	flag.IntVar(&l.Conns, "conns", 8, "concurrent connections")
	flag.IntVar(&l.Msgs, "msgs", 0, "messages in all (0: run for -duration)")
	flag.DurationVar(&l.Duration, "duration", 0, "how long to run (0: until -msgs are sent)")
	flag.IntVar(&l.PerConn, "per-conn", 1, "messages per connection, RSET between (1: a new connection for each)")
	flag.IntVar(&l.Size, "size", 2048, "message size in bytes (multipart/alternative, text and HTML)")
	flag.Float64Var(&l.Rate, "rate", 0, "messages per second in all (0: as fast as possible)")
	flag.DurationVar(&l.Timeout, "timeout", 0, "per-message timeout (0: 10s)")
	prefix := flag.String("subject", "load-", "message i's subject is this followed by i (and so are its bytes and delivery key): give each run its own, or a server that deduplicates stores a run's messages as copies of an earlier run's")
	flag.Parse()
	l.Subject = func(i int) string { return *prefix + strconv.Itoa(i) }
	if err := run(l, *rcptFile, *rcpt, *src); err != nil {
		fmt.Fprintln(os.Stderr, "smtpload:", err)
		os.Exit(1)
	}
}

func run(l load.SMTPLoad, rcptFile, rcpt, src string) error {
	if rcpt != "" {
		l.Rcpts = strings.Split(rcpt, ",")
	}
	if rcptFile != "" {
		f, err := os.Open(rcptFile)
		if err != nil {
			return err
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if fields := strings.Fields(sc.Text()); len(fields) > 0 {
				l.Rcpts = append(l.Rcpts, fields[0])
			}
		}
		f.Close()
		if err := sc.Err(); err != nil {
			return err
		}
	}
	if len(l.Rcpts) == 0 {
		return fmt.Errorf("no recipients: give -rcpts or -rcpt")
	}
	if l.Msgs == 0 && l.Duration == 0 {
		return fmt.Errorf("give -msgs or -duration")
	}
	if l.Conns < 1 {
		return fmt.Errorf("-conns must be at least 1")
	}
	var err error
	if l.Sources, err = load.NewSourcePool(src); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return l.Run(ctx).Print(os.Stdout)
}
