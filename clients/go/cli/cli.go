// Package cli is the command-line tool over package client, for shell
// scripts and CI jobs: `mayfly inbox <command>` in the mayfly binary, or the
// stand-alone mayfly-inbox (clients/go/cmd/mayfly-inbox).
//
//	addr=$(mayfly inbox new)                       # create + select, print the address
//	swaks --to "$addr" ...                         # the system under test sends mail
//	mayfly inbox wait --subject 'Your code' --timeout 60s
//
// The inbox's cookies persist between invocations in a jar file of mode 0600
// (--jar, default $XDG_STATE_HOME/mayfly/jar.json); they are never printed.
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	client "github.com/mayfly/mayfly/clients/go"
)

// Exit codes.
const (
	ExitOK      = 0
	ExitError   = 1 // any failure not below
	ExitUsage   = 2 // bad command line
	ExitTimeout = 3 // wait: no matching message before --timeout
	ExitGone    = 4 // the inbox expired or was deleted (or the jar holds none)
)

// DefaultBase is what `make run` serves.
const DefaultBase = "http://127.0.0.1:8080/v1"

const usage = `usage: %[1]s [--base URL] [--jar PATH] <command> [flags]

commands:
  new [--lifetime 10m] [--json]    create and select an inbox; print its address
  show [--json]                    print the current inbox
  list [--limit N] [--json]        list its messages, newest first
  read ID [--html] [--json]        print a message's text (or sanitized HTML)
  wait [--subject RE] [--from RE] [--timeout 60s] [--html] [--json]
                                   wait for a matching message (also one already
                                   there) and print it; exit 3 on timeout
  extend [--minutes 10]            extend the inbox; print the expiry granted
  delete                           delete the inbox and forget it
  events                           print each new message as a JSON line

The service: --base, else $MAYFLY_URL, else ` + DefaultBase + `.
The jar: --jar, else $XDG_STATE_HOME/mayfly/jar.json (~/.local/state/...),
mode 0600; it holds the inbox's cookies and is never printed.
Exit codes: 0 ok, 1 error, 2 usage, 3 wait timed out, 4 inbox gone.
`

// Main runs the tool with args (without the program name) and returns the
// exit code. prog names the tool in messages.
func Main(prog string, args []string, env func(string) string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	t := &tool{prog: prog, env: env, out: stdout, errw: stderr}
	return t.run(ctx, args)
}

type tool struct {
	prog      string
	env       func(string) string
	out, errw io.Writer
	base, jar string
}

func (t *tool) flags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(t.prog+" "+name, flag.ContinueOnError)
	fs.SetOutput(t.errw)
	fs.StringVar(&t.base, "base", t.base, "the API base URL, with /v1")
	fs.StringVar(&t.jar, "jar", t.jar, "the jar file")
	fs.Usage = func() { fmt.Fprintf(t.errw, usage, t.prog) }
	return fs
}

func (t *tool) run(ctx context.Context, args []string) int {
	t.base = t.env("MAYFLY_URL")
	if t.base == "" {
		t.base = DefaultBase
	}
	t.jar = defaultJar(t.env)
	top := t.flags("")
	if err := top.Parse(args); err != nil {
		return ExitUsage
	}
	if top.NArg() == 0 {
		top.Usage()
		return ExitUsage
	}
	cmd, rest := top.Arg(0), top.Args()[1:]
	switch cmd {
	case "new", "show", "list", "read", "wait", "extend", "delete", "events":
	case "help":
		fmt.Fprintf(t.out, usage, t.prog)
		return ExitOK
	default:
		return t.usage("unknown command " + cmd)
	}
	fs := t.flags(cmd)
	var (
		asJSON   = fs.Bool("json", false, "print JSON")
		lifetime = fs.Duration("lifetime", 0, "new: the inbox's lifetime (1m to 10m; default the service's)")
		limit    = fs.Int("limit", 100, "list: page size (all pages are listed)")
		html     = fs.Bool("html", false, "read, wait: print the sanitized HTML body instead of the text")
		subject  = fs.String("subject", "", "wait: a regexp the subject must match")
		from     = fs.String("from", "", "wait: a regexp the sender must match")
		timeout  = fs.Duration("timeout", 60*time.Second, "wait: give up after this long")
		minutes  = fs.Int("minutes", 10, "extend: minutes to add (1 to 10)")
	)
	// Flags may follow the positional argument (read ID --html).
	var positional []string
	for {
		if err := fs.Parse(rest); err != nil {
			return ExitUsage
		}
		if fs.NArg() == 0 {
			break
		}
		positional = append(positional, fs.Arg(0))
		rest = fs.Args()[1:]
	}
	c, err := client.New(t.base, client.WithUserAgent("mayfly-cli/1"))
	if err != nil {
		return t.fail(err)
	}
	if cmd == "new" {
		if len(positional) != 0 {
			return t.usage("new takes no arguments")
		}
		in, err := c.CreateInbox(ctx, *lifetime)
		if err != nil {
			return t.fail(err)
		}
		if err := saveJar(t.jar, in.State()); err != nil {
			return t.fail(err)
		}
		if *asJSON {
			return t.printJSON(in.Mailbox())
		}
		fmt.Fprintln(t.out, in.Mailbox().Address)
		return ExitOK
	}
	st, err := loadJar(t.jar)
	if err != nil {
		fmt.Fprintf(t.errw, "%s: %v (create an inbox with `%s new`)\n", t.prog, err, t.prog)
		return ExitGone
	}
	in, err := c.Restore(st)
	if err != nil {
		return t.fail(err)
	}
	code := t.command(ctx, cmd, positional, in, cmdFlags{asJSON: *asJSON, limit: *limit, html: *html,
		subject: *subject, from: *from, timeout: *timeout, minutes: *minutes})
	if cmd != "delete" && (code == ExitOK || code == ExitTimeout) {
		// The service may have changed a cookie. A command that found the
		// inbox gone leaves the jar alone (another invocation may have
		// deleted it meanwhile).
		if err := saveJar(t.jar, in.State()); err != nil {
			return t.fail(err)
		}
	}
	return code
}

type cmdFlags struct {
	asJSON, html  bool
	limit         int
	subject, from string
	timeout       time.Duration
	minutes       int
}

func (t *tool) command(ctx context.Context, cmd string, args []string, in *client.Inbox, f cmdFlags) int {
	if cmd != "read" && len(args) != 0 || cmd == "read" && len(args) != 1 {
		return t.usage(cmd + ": wrong arguments")
	}
	switch cmd {
	case "show":
		m, err := in.Current(ctx)
		if err != nil {
			return t.fail(err)
		}
		if f.asJSON {
			return t.printJSON(m)
		}
		fmt.Fprintf(t.out, "%s\nexpires %s (at most %s)\n", m.Address, stamp(m.ExpiresAt), stamp(m.MaxExpiresAt))
	case "list":
		var all []client.MessageSummary
		for m, err := range in.All(ctx, max(1, min(f.limit, 100))) {
			if err != nil {
				return t.fail(err)
			}
			all = append(all, m)
		}
		if f.asJSON {
			return t.printJSON(all)
		}
		for _, m := range all {
			fmt.Fprintf(t.out, "%s\t%s\t%s\t%s\t%s\n", m.ID, stamp(m.ReceivedAt), m.Status, oneLine(m.From), oneLine(m.Subject))
		}
	case "read":
		m, err := in.Message(ctx, args[0])
		if err != nil {
			return t.fail(err)
		}
		return t.printMessage(m, f)
	case "wait":
		var match client.Match
		for _, re := range []struct {
			dst **regexp.Regexp
			src string
		}{{&match.Subject, f.subject}, {&match.From, f.from}} {
			if re.src == "" {
				continue
			}
			r, err := regexp.Compile(re.src)
			if err != nil {
				return t.usage(fmt.Sprintf("wait: %v", err))
			}
			*re.dst = r
		}
		wctx, cancel := context.WithTimeout(ctx, f.timeout)
		defer cancel()
		m, err := in.WaitForMessage(wctx, match)
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			fmt.Fprintf(t.errw, "%s: no matching message within %v\n", t.prog, f.timeout)
			return ExitTimeout
		}
		if err != nil {
			return t.fail(err)
		}
		return t.printMessage(m, f)
	case "extend":
		exp, err := in.Extend(ctx, f.minutes)
		if err != nil {
			return t.fail(err)
		}
		fmt.Fprintln(t.out, stamp(exp))
	case "delete":
		if err := in.Delete(ctx); err != nil && !errors.Is(err, client.ErrUnauthorized) {
			return t.fail(err)
		}
		if err := os.Remove(t.jar); err != nil && !errors.Is(err, os.ErrNotExist) {
			return t.fail(err)
		}
	case "events":
		enc := json.NewEncoder(t.out)
		for ev, err := range in.Events(ctx) {
			if err != nil {
				if ctx.Err() != nil {
					return ExitOK // interrupted
				}
				return t.fail(err)
			}
			if err := enc.Encode(struct {
				Type    string                `json:"type"`
				Missed  bool                  `json:"missed,omitempty"`
				Message client.MessageSummary `json:"message"`
			}{ev.Type, ev.Missed, ev.Message}); err != nil {
				return t.fail(err)
			}
		}
	default:
		return t.usage("unknown command " + cmd)
	}
	return ExitOK
}

func (t *tool) printMessage(m client.Message, f cmdFlags) int {
	if f.asJSON {
		return t.printJSON(m)
	}
	body := m.TextBody
	if f.html {
		body = m.HTMLBody
	}
	fmt.Fprintf(t.out, "From: %s\nSubject: %s\nDate: %s\nId: %s\n\n%s\n", oneLine(m.From), oneLine(m.Subject), stamp(m.ReceivedAt), m.ID, body)
	return ExitOK
}

func (t *tool) printJSON(v any) int {
	enc := json.NewEncoder(t.out)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return t.fail(err)
	}
	return ExitOK
}

func (t *tool) usage(msg string) int {
	fmt.Fprintf(t.errw, "%s: %s\n", t.prog, msg)
	fmt.Fprintf(t.errw, usage, t.prog)
	return ExitUsage
}

// fail prints err (never a cookie: errors carry codes, messages and request
// ids only) and picks the exit code.
func (t *tool) fail(err error) int {
	fmt.Fprintf(t.errw, "%s: %v\n", t.prog, err)
	if errors.Is(err, client.ErrInboxGone) || errors.Is(err, client.ErrUnauthorized) || errors.Is(err, client.ErrMailboxNotFound) {
		return ExitGone
	}
	return ExitError
}

func stamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

func oneLine(s string) string { return strings.NewReplacer("\r", " ", "\n", " ", "\t", " ").Replace(s) }

// defaultJar is $XDG_STATE_HOME/mayfly/jar.json, or ~/.local/state/... .
func defaultJar(env func(string) string) string {
	dir := env("XDG_STATE_HOME")
	if dir == "" || !filepath.IsAbs(dir) {
		home := env("HOME")
		if home == "" {
			home, _ = os.UserHomeDir()
		}
		dir = filepath.Join(home, ".local", "state")
	}
	return filepath.Join(dir, "mayfly", "jar.json")
}

// saveJar writes st to path with mode 0600, atomically (a temporary file in
// the same directory, renamed over it).
func saveJar(path string, st client.State) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("jar: %w", err)
	}
	raw, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return fmt.Errorf("jar: %w", err)
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".jar-*")
	if err != nil {
		return fmt.Errorf("jar: %w", err)
	}
	defer os.Remove(f.Name())
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return fmt.Errorf("jar: %w", err)
	}
	if _, err := f.Write(raw); err != nil {
		f.Close()
		return fmt.Errorf("jar: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("jar: %w", err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("jar: %w", err)
	}
	return nil
}

func loadJar(path string) (client.State, error) {
	var st client.State
	raw, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return st, fmt.Errorf("no inbox in %s", path)
	}
	if err != nil {
		return st, fmt.Errorf("jar: %w", err)
	}
	if err := json.Unmarshal(raw, &st); err != nil || st.Mailbox.ID == "" {
		return st, fmt.Errorf("jar %s is not an inbox: %v", path, err)
	}
	return st, nil
}
