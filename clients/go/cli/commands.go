package cli

// The commands: what each does with an inbox and how it prints.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	client "github.com/mayfly/mayfly/clients/go"
)

type cmdFlags struct {
	asJSON, html, replace, code, links bool
	limit, minutes                     int
	subject, from, text, since         string
	codePattern                        string
	timeout, lifetime                  time.Duration
}

// create makes a new inbox under t.name; a live inbox of that name is
// deleted first with --replace, else kept and the command refused.
func (t *tool) create(ctx context.Context, c *client.Client, f cmdFlags) int {
	old, ok, err := loadEntry(t.jar, t.name)
	if err != nil {
		return t.fail(err)
	}
	if ok && !old.Gone {
		in, err := c.Restore(old)
		if err != nil {
			return t.fail(fmt.Errorf("%w (the jar's inbox %q belongs to another service: use another --name or --jar)", err, t.name))
		}
		live, err := in.Current(ctx)
		switch {
		case errors.Is(err, client.ErrInboxGone):
			// It expired or was deleted elsewhere: nothing to lose.
		case err != nil:
			return t.fail(fmt.Errorf("checking the jar's inbox %q (%s) before replacing it: %w", t.name, old.Mailbox.Address, err))
		case !f.replace:
			fmt.Fprintf(t.errw, "%s: the jar already holds the live inbox %q (%s, expires %s): "+
				"use it, delete it (`%s delete`), name another (`%s --name other new`) or replace it (`%s new --replace`)\n",
				t.prog, t.name, live.Address, stamp(live.ExpiresAt), t.prog, t.prog, t.prog)
			return ExitError
		default:
			if err := in.Delete(ctx); err != nil && !errors.Is(err, client.ErrInboxGone) {
				return t.fail(fmt.Errorf("deleting the inbox it replaces (%s): %w", live.Address, err))
			}
		}
	}
	in, err := c.CreateInbox(ctx, f.lifetime)
	if err != nil {
		return t.fail(err)
	}
	if err := saveEntry(t.jar, t.name, in.State(), true); err != nil {
		return t.fail(err)
	}
	if f.asJSON {
		return t.printJSON(in.Mailbox())
	}
	fmt.Fprintln(t.out, in.Mailbox().Address)
	return ExitOK
}

func (t *tool) listInboxes(f cmdFlags) int {
	j, err := loadJar(t.jar)
	if err != nil {
		return t.fail(err)
	}
	type entry struct {
		Name      string    `json:"name"`
		Address   string    `json:"address"`
		ID        string    `json:"id"`
		ExpiresAt time.Time `json:"expires_at"`
		Gone      bool      `json:"gone,omitempty"`
	}
	out := []entry{}
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for n := range j.Inboxes {
			if !yield(n) {
				return
			}
		}
	}) {
		st := j.Inboxes[name]
		out = append(out, entry{name, st.Mailbox.Address, st.Mailbox.ID, st.Mailbox.ExpiresAt, st.Gone})
	}
	if f.asJSON {
		return t.printJSON(out)
	}
	for _, e := range out {
		state := "expires " + stamp(e.ExpiresAt) // as last seen: an extension elsewhere moves it
		if e.Gone {
			state = "gone"
		}
		fmt.Fprintf(t.out, "%s\t%s\t%s\n", e.Name, e.Address, state)
	}
	return ExitOK
}

func (t *tool) command(ctx context.Context, cmd string, args []string, in *client.Inbox, f cmdFlags) int {
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
		all := []client.MessageSummary{} // [] in JSON when empty, never null
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
		}{{&match.Subject, f.subject}, {&match.From, f.from}, {&match.Text, f.text}} {
			if re.src == "" {
				continue
			}
			r, err := regexp.Compile(re.src)
			if err != nil {
				return t.usage(fmt.Sprintf("wait: %v", err))
			}
			*re.dst = r
		}
		since, err := client.ParseSince(f.since)
		if err != nil {
			return t.usage(strings.TrimPrefix(err.Error(), "mayfly: "))
		}
		match.Since = since
		wctx, cancel := context.WithTimeout(ctx, f.timeout)
		defer cancel()
		m, err := in.WaitForMessage(wctx, match)
		if errors.Is(err, client.ErrWaitTimeout) {
			why := strings.TrimPrefix(err.Error(), client.ErrWaitTimeout.Error()+": ")
			fmt.Fprintf(t.errw, "%s: no matching message within %v (since %s): %s\n", t.prog, f.timeout, since, why)
			return ExitTimeout
		}
		if err != nil {
			return t.fail(err)
		}
		return t.printMessage(m, f)
	case "extend":
		m, err := in.Extend(ctx, f.minutes)
		if err != nil {
			return t.fail(err)
		}
		fmt.Fprintln(t.out, stamp(m.ExpiresAt))
	case "delete":
		existed, err := in.DeleteExisted(ctx)
		if err != nil && !errors.Is(err, client.ErrInboxGone) {
			return t.fail(err)
		}
		if existed {
			fmt.Fprintf(t.errw, "%s: deleted the inbox %s\n", t.prog, in.Mailbox().Address)
		} else {
			fmt.Fprintf(t.errw, "%s: the inbox %s was already gone (expired or deleted elsewhere)\n", t.prog, in.Mailbox().Address)
		}
	case "events":
		// The client's events end at 20 s without a deadline: the tool
		// follows until told otherwise.
		follow := f.timeout
		if follow <= 0 {
			follow = 100 * 365 * 24 * time.Hour
		}
		ectx, cancel := context.WithTimeout(ctx, follow)
		defer cancel()
		enc := json.NewEncoder(t.out)
		for ev, err := range in.Events(ectx) {
			if err != nil {
				if ectx.Err() != nil {
					return ExitOK // interrupted, or --timeout
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
	}
	return ExitOK
}

func (t *tool) printMessage(m client.Message, f cmdFlags) int {
	switch {
	case f.code:
		var re *regexp.Regexp
		if f.codePattern != "" {
			var err error
			if re, err = regexp.Compile(f.codePattern); err != nil {
				return t.usage(fmt.Sprintf("--code-pattern: %v", err))
			}
		}
		code, ok := client.Code(m, re)
		if !ok {
			fmt.Fprintf(t.errw, "%s: no code in message %s (%q)\n", t.prog, m.ID, oneLine(m.Subject))
			return ExitError
		}
		fmt.Fprintln(t.out, code)
		return ExitOK
	case f.links:
		for _, l := range client.Links(m) {
			fmt.Fprintln(t.out, l)
		}
		return ExitOK
	case f.asJSON:
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
