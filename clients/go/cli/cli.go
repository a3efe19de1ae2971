// Package cli is the command-line tool over package client, for shell
// scripts and CI jobs: `mayfly inbox <command>`, in the server's mayfly
// binary or in the client module's stand-alone one (clients/go/cmd/mayfly,
// which has only the inbox command).
//
//	addr=$(mayfly inbox new)                       # create + select, print the address
//	swaks --to "$addr" ...                         # the system under test sends mail
//	mayfly inbox wait --subject 'Your code' --code # up to 20 s (--timeout 1m for more)
//
// The jar file (--jar, default $XDG_STATE_HOME/mayfly/jar.json, mode 0600)
// holds named inboxes (--name, default "default") with their cookies, which
// are never printed, and the ids of the messages already printed, so that a
// second `wait` returns the next message ("unseen", the default). `new`
// refuses to replace a live inbox of the same name unless --replace, which
// deletes it first: an inbox is never lost silently.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"slices"
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
	ExitGone    = 4 // the inbox expired or was deleted (or the jar holds none of that name)
	// ExitUnreachable: the service gave no answer at all (connection
	// refused, reset, timeouts) for 10 s in a row during a wait, or a call
	// failed without any answer.
	ExitUnreachable = 5
)

// DefaultBase is what `make run` serves.
const DefaultBase = "http://127.0.0.1:8080/v1"

// DefaultName names the inbox when --name is not given.
const DefaultName = "default"

const usage = `usage: %[1]s [--base URL] [--jar PATH] [--name NAME] <command> [flags]

commands:
  new [--lifetime 10m] [--replace] [--json]
                          create and select an inbox; print its address. Refuses
                          while the jar holds a live inbox of that name, unless
                          --replace (which deletes the old one first)
  show [--json]           print the inbox
  list [--limit N] [--json]
                          list its messages, newest first
  read ID [--html] [--json] [--code] [--code-pattern RE] [--links]
                          print a message's text (or sanitized HTML), or its code
                          or links
  wait [--subject RE] [--from RE] [--text RE] [--since unseen|now|ID|TIME]
       [--timeout 20s] [--html] [--json] [--code] [--code-pattern RE] [--links]
                          wait for a matching message and print it; exit 3 on
                          timeout (saying why), 5 when the service has not
                          answered for 10 s. --since: unseen (default: one not printed
                          before by this jar), now (one that arrives after the
                          wait starts), a message id (one received after it), an
                          RFC 3339 time (one received after it)
  extend [--minutes 10]   extend the inbox; print the expiry granted
  delete                  delete the inbox and forget it; exit 0 when it was
                          already gone (deleted or expired), saying which
  events [--timeout D]    print each new message as a JSON line, until
                          interrupted, the inbox is gone or --timeout
  list-inboxes [--json]   the jar's inboxes: name, address, expiry
  version                 print the tool's version

Global flags go before the command: --base (else $MAYFLY_URL, else
` + DefaultBase + `), --jar (else $XDG_STATE_HOME/mayfly/jar.json,
~/.local/state/...; mode 0600, never printed), --name (else $MAYFLY_INBOX,
else "default"), --verbose (log retries and reconnects).
One event stream per inbox: if another program follows the same inbox
(events and wait in two terminals), the service ends the older stream and
the tool says so and polls every 5 s for a minute instead of taking it back.
Exit codes: 0 ok, 1 error, 2 usage, 3 wait timed out, 4 inbox gone (or
deleted), 5 service unreachable.
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
	prog            string
	env             func(string) string
	out, errw       io.Writer
	base, jar, name string
	verbose         bool
}

func (t *tool) run(ctx context.Context, args []string) int {
	t.base, t.jar, t.name = or(t.env("MAYFLY_URL"), DefaultBase), defaultJar(t.env), or(t.env("MAYFLY_INBOX"), DefaultName)
	top := flag.NewFlagSet(t.prog, flag.ContinueOnError)
	top.SetOutput(io.Discard)
	t.globalFlags(top)
	if err := top.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(t.out, usage, t.prog)
			return ExitOK
		}
		return t.usage(err.Error())
	}
	if top.NArg() == 0 {
		return t.usage("a command is needed")
	}
	cmd, rest := top.Arg(0), top.Args()[1:]
	if cmd == "help" {
		fmt.Fprintf(t.out, usage, t.prog)
		return ExitOK
	}
	// Each command knows its own flags and rejects the others'.
	fs := flag.NewFlagSet(t.prog+" "+cmd, flag.ContinueOnError)
	fs.SetOutput(t.errw)
	if slices.ContainsFunc(rest, func(a string) bool { return a == "-h" || a == "-help" || a == "--help" }) {
		fs.SetOutput(t.out) // asked for: the usage is the answer, on stdout
	}
	fs.Usage = func() { fmt.Fprintf(fs.Output(), "usage: %s %s\n", t.prog, commandUsage(cmd)); fs.PrintDefaults() }
	t.globalFlags(fs)
	var f cmdFlags
	switch cmd {
	case "new":
		fs.DurationVar(&f.lifetime, "lifetime", 0, "the inbox's lifetime (1m to 10m; default the service's)")
		fs.BoolVar(&f.replace, "replace", false, "delete the jar's live inbox of this name first")
		fs.BoolVar(&f.asJSON, "json", false, "print JSON")
	case "show", "list-inboxes":
		fs.BoolVar(&f.asJSON, "json", false, "print JSON")
	case "list":
		fs.IntVar(&f.limit, "limit", 100, "page size (all pages are listed)")
		fs.BoolVar(&f.asJSON, "json", false, "print JSON")
	case "read", "wait":
		fs.BoolVar(&f.asJSON, "json", false, "print JSON")
		fs.BoolVar(&f.html, "html", false, "print the sanitized HTML body instead of the text")
		fs.BoolVar(&f.code, "code", false, "print only the code (4 to 8 digits, or --code-pattern); exit 1 if none")
		fs.StringVar(&f.codePattern, "code-pattern", "", "the code's regexp (group 1 if it has one); implies --code")
		fs.BoolVar(&f.links, "links", false, "print only the links, one a line")
		if cmd == "wait" {
			fs.StringVar(&f.subject, "subject", "", "a regexp the subject must match")
			fs.StringVar(&f.from, "from", "", "a regexp the sender must match")
			fs.StringVar(&f.text, "text", "", "a regexp the text body must match")
			fs.StringVar(&f.since, "since", "unseen", "unseen, now, a message id or an RFC 3339 time")
			fs.DurationVar(&f.timeout, "timeout", client.DefaultWaitTimeout, "give up after this long")
		}
	case "extend":
		fs.IntVar(&f.minutes, "minutes", 10, "minutes to add (1 to 10)")
	case "events":
		fs.DurationVar(&f.timeout, "timeout", 0, "stop following after this long (default: until interrupted or the inbox is gone)")
	case "delete", "version":
	default:
		return t.usage("unknown command " + cmd)
	}
	// Flags may follow the positional argument (read ID --html).
	var positional []string
	for {
		if err := fs.Parse(rest); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return ExitOK
			}
			return ExitUsage
		}
		if fs.NArg() == 0 {
			break
		}
		positional = append(positional, fs.Arg(0))
		rest = fs.Args()[1:]
	}
	if want := map[string]int{"read": 1}[cmd]; len(positional) != want {
		return t.usage(fmt.Sprintf("%s takes %d argument(s), got %d", cmd, want, len(positional)))
	}
	if cmd == "version" {
		fmt.Fprintln(t.out, t.prog, Version())
		return ExitOK
	}
	if f.codePattern != "" {
		f.code = true
	}
	level := slog.LevelWarn
	if t.verbose {
		level = slog.LevelDebug
	}
	c, err := client.New(t.base, client.WithUserAgent("mayfly-cli/"+Version()),
		client.WithLogger(slog.New(&lineHandler{prog: t.prog, w: t.errw, level: level})))
	if err != nil {
		return t.fail(err)
	}
	switch cmd {
	case "new":
		return t.create(ctx, c, f)
	case "list-inboxes":
		return t.listInboxes(f)
	}
	st, ok, err := loadEntry(t.jar, t.name)
	if err != nil {
		return t.fail(err)
	}
	if !ok {
		if d, deleted := deletedEntry(t.jar, t.name); deleted && cmd == "delete" {
			// delete is idempotent, like the clients' Delete.
			fmt.Fprintf(t.errw, "%s: the inbox %q (%s) was already deleted at %s\n", t.prog, t.name, d.Address, stamp(d.At))
			return ExitOK
		} else if deleted {
			fmt.Fprintf(t.errw, "%s: the inbox %q (%s) was deleted at %s by `%s delete` (create one with `%s new`)\n",
				t.prog, t.name, d.Address, stamp(d.At), t.prog, t.prog)
			return ExitGone
		}
		fmt.Fprintf(t.errw, "%s: no inbox named %q in %s (create one with `%s new`)\n", t.prog, t.name, t.jar, t.prog)
		return ExitGone
	}
	in, err := c.Restore(st)
	if err != nil {
		return t.fail(err)
	}
	code := t.command(ctx, cmd, positional, in, f)
	if cmd == "delete" && code == ExitOK {
		if err := removeEntry(t.jar, t.name, in.Mailbox()); err != nil {
			return t.fail(err)
		}
		return code
	}
	// The service may have changed a cookie; the printed messages and a
	// gone inbox are remembered.
	if err := saveEntry(t.jar, t.name, in.State(), false); err != nil {
		return t.fail(err)
	}
	return code
}

// globalFlags may come before the command or among its flags.
func (t *tool) globalFlags(fs *flag.FlagSet) {
	fs.StringVar(&t.base, "base", t.base, "the API base URL, with /v1 (else $MAYFLY_URL)")
	fs.StringVar(&t.jar, "jar", t.jar, "the jar file")
	fs.StringVar(&t.name, "name", t.name, "the inbox's name in the jar (else $MAYFLY_INBOX, else default)")
	fs.BoolVar(&t.verbose, "verbose", t.verbose, "log retries and reconnects")
}

func or(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func commandUsage(cmd string) string {
	for _, line := range strings.Split(usage, "\n") {
		if l := strings.TrimSpace(line); strings.HasPrefix(l, cmd+" ") || l == cmd {
			return l
		}
	}
	return cmd
}

func (t *tool) usage(msg string) int {
	fmt.Fprintf(t.errw, "%s: %s\n", t.prog, msg)
	fmt.Fprintf(t.errw, usage, t.prog)
	return ExitUsage
}

// fail prints err once, without the client's "mayfly: " prefix (errors
// carry codes, messages, details and request ids, never a cookie), and
// picks the exit code.
func (t *tool) fail(err error) int {
	fmt.Fprintf(t.errw, "%s: %s\n", t.prog, strings.TrimPrefix(err.Error(), "mayfly: "))
	switch {
	case errors.Is(err, client.ErrInboxGone):
		return ExitGone
	case errors.Is(err, client.ErrUnreachable) || unanswered(err):
		return ExitUnreachable
	}
	return ExitError
}

// unanswered reports whether err is a call that had no HTTP answer at all
// (the connection refused, reset or timed out), rather than an API error.
func unanswered(err error) bool {
	var apiErr *client.Error
	var netErr net.Error
	return !errors.As(err, &apiErr) && (errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.As(err, &netErr))
}

// Version is the module version from the build info (a tag when installed
// with `go install …@version`, else "(devel)" and the VCS revision, with
// "+dirty" for uncommitted changes, when the build recorded one), then the
// Go version.
func Version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(unknown)"
	}
	v := bi.Main.Version
	if v != "" && v != "(devel)" {
		return v + " " + bi.GoVersion
	}
	var rev, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	if rev != "" {
		return "(devel) " + rev[:min(12, len(rev))] + dirty + " " + bi.GoVersion
	}
	return "(devel) " + bi.GoVersion
}

// lineHandler prints the client's warnings (and with --verbose its retries
// and reconnects) as one line each on stderr: "prog: message (k=v ...)".
type lineHandler struct {
	prog  string
	w     io.Writer
	level slog.Level
	attrs []slog.Attr
}

func (h *lineHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level }

func (h *lineHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(h.prog + ": " + strings.TrimPrefix(r.Message, "mayfly: "))
	sep := " ("
	add := func(a slog.Attr) bool {
		b.WriteString(sep + a.Key + "=" + strings.TrimPrefix(a.Value.String(), "mayfly: "))
		sep = ", "
		return true
	}
	for _, a := range h.attrs {
		add(a)
	}
	r.Attrs(add)
	if sep == ", " {
		b.WriteByte(')')
	}
	b.WriteByte('\n')
	_, err := io.WriteString(h.w, b.String())
	return err
}

func (h *lineHandler) WithAttrs(as []slog.Attr) slog.Handler {
	c := *h
	c.attrs = append(slices.Clone(h.attrs), as...)
	return &c
}

func (h *lineHandler) WithGroup(string) slog.Handler { return h }

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
