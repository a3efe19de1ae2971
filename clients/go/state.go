package client

// Save and restore (clients/SCENARIOS.md, "Save and restore"): the state
// format the three official clients share.

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

// SavedCookie is a cookie of a saved inbox.
type SavedCookie struct {
	Name    string
	Value   string
	Path    string
	Expires time.Time // zero: a session cookie (omitted from the JSON)
	Secure  bool
}

type savedCookieJSON struct {
	Name    string     `json:"name"`
	Value   string     `json:"value"`
	Path    string     `json:"path"`
	Expires *time.Time `json:"expires,omitempty"`
	Secure  bool       `json:"secure,omitempty"`
}

// MarshalJSON writes the shared state format's cookie: expires (RFC 3339,
// whole seconds) only for a persistent cookie.
func (c SavedCookie) MarshalJSON() ([]byte, error) {
	j := savedCookieJSON{Name: c.Name, Value: c.Value, Path: c.Path, Secure: c.Secure}
	if !c.Expires.IsZero() {
		t := c.Expires.UTC().Truncate(time.Second)
		j.Expires = &t
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads the shared state format's cookie.
func (c *SavedCookie) UnmarshalJSON(b []byte) error {
	var j savedCookieJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*c = SavedCookie{Name: j.Name, Value: j.Value, Path: j.Path, Secure: j.Secure}
	if j.Expires != nil {
		c.Expires = *j.Expires
	}
	return nil
}

// StateVersion is the version of the state format State writes.
const StateVersion = 1

// State is what Restore needs to take an inbox up again in another process:
// the service, the mailbox, the jar's cookies and the messages already
// returned. Its JSON is the format the three official clients share
// (clients/SCENARIOS.md, "Save and restore"): a state written by the
// TypeScript or Python client restores here, and this one there. It holds
// secrets: keep it where only its owner can read it, never in logs.
type State struct {
	Version int           `json:"version"`
	Base    string        `json:"base"`
	Mailbox Mailbox       `json:"mailbox"`
	Cookies []SavedCookie `json:"cookies"`
	// Seen lists the messages already returned (by a wait or Message),
	// oldest first: a restored Inbox's SinceUnseen waits pass over them.
	Seen []string `json:"seen"`
	// Gone is set once the inbox is known to be gone.
	Gone bool `json:"gone,omitempty"`
}

// State returns the inbox's state for Restore.
func (in *Inbox) State() State {
	in.mu.Lock()
	seen := slices.Clone(in.order)
	in.mu.Unlock()
	if seen == nil {
		seen = []string{}
	}
	cookies := in.jar.saved()
	if cookies == nil {
		cookies = []SavedCookie{}
	}
	return State{Version: StateVersion, Base: in.c.base.String(), Mailbox: in.Mailbox(), Cookies: cookies, Seen: seen, Gone: in.Gone() != nil}
}

// Restore takes up an inbox saved with State (by this client or another
// official one). It makes no request. A state of another version, or of
// another service, is refused. (A state without a version, written before
// the shared format, reads as version 1.)
func (c *Client) Restore(st State) (*Inbox, error) {
	if st.Version != StateVersion && st.Version != 0 {
		return nil, fmt.Errorf("mayfly: state version %d: this client reads version %d", st.Version, StateVersion)
	}
	if strings.TrimSuffix(st.Base, "/") != c.base.String() {
		return nil, fmt.Errorf("mayfly: the inbox belongs to %s, not %s", st.Base, c.base)
	}
	in := c.newInbox()
	in.jar.restore(st.Cookies)
	m := st.Mailbox
	in.mailbox.Store(&m)
	for _, id := range st.Seen {
		in.markReturned(id)
	}
	if st.Gone {
		in.goneErr.Store(&gone{})
	}
	return in, nil
}
