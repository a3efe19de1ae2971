package main

// The state format of clients/SCENARIOS.md ("Save and restore") across the
// three official clients, with real mail: an inbox made and read in Go is
// restored by the Python client, then by the TypeScript client, then by Go
// again, each reading the next message and passing over the ones the
// others already returned.

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	client "github.com/mayfly/mayfly/clients/go"
)

// stateTool runs a client's state tool (HELPERS' interface: a state on
// stdin, a wait since unseen, one line {"subject", "state"} on stdout) and
// returns the subject it read and the state it wrote.
func stateTool(t *testing.T, name string, argv []string, state []byte) (string, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Stdin = bytes.NewReader(state)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s state tool (%v): %v\n%s", name, argv, err, stderr.String())
	}
	var out struct {
		Subject string          `json:"subject"`
		State   json.RawMessage `json:"state"`
	}
	if err := json.Unmarshal(bytes.TrimSpace(stdout.Bytes()), &out); err != nil {
		t.Fatalf("%s state tool printed %d bytes that are not one JSON line: %v", name, stdout.Len(), err)
	}
	return out.Subject, out.State
}

// toolPath is the repository's path of a state tool, or the file an
// environment variable names instead (to try a tool from elsewhere).
func toolPath(t *testing.T, env, rel string) string {
	t.Helper()
	p := os.Getenv(env)
	if p == "" {
		p = filepath.Join("..", "..", rel)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("the state tool %s: %v (%s names another)", rel, err, env)
	}
	abs, _ := filepath.Abs(p)
	return abs
}

func TestStateAcrossClients(t *testing.T) {
	t.Parallel()
	py := toolPath(t, "MAYFLY_TEST_PY_STATE_TOOL", "clients/python/tests/state_tool.py")
	ts := toolPath(t, "MAYFLY_TEST_TS_STATE_TOOL", "clients/typescript/test/state-tool.mjs")
	s, ctx, in := scenarioInbox(t, 90*time.Second)
	addr := in.Mailbox().Address
	var ids []string
	sendMail(t, s.smtp, addr, codeMail(addr, "read in Go", "100001"))
	first, err := in.WaitForMessage(ctx, client.Match{})
	if err != nil {
		t.Fatal(err)
	}
	ids = append(ids, first.ID)
	state, err := json.Marshal(in.State())
	if err != nil {
		t.Fatal(err)
	}
	for _, hop := range []struct {
		name    string
		argv    []string
		subject string
	}{
		{"Python", []string{"python3", py, "20"}, "read in Python"},
		{"TypeScript", []string{"node", ts, "20"}, "read in TypeScript"},
	} {
		sendMail(t, s.smtp, addr, codeMail(addr, hop.subject, "200002"))
		got, next := stateTool(t, hop.name, hop.argv, state)
		if got != hop.subject {
			t.Fatalf("%s restored the Go-made inbox and read %q; want %q (the messages seen before are passed over)", hop.name, got, hop.subject)
		}
		var st client.State
		if err := json.Unmarshal(next, &st); err != nil || st.Version != 1 {
			t.Fatalf("%s wrote a state Go cannot read (version %d): %v", hop.name, st.Version, err)
		}
		if len(st.Seen) != len(ids)+1 {
			t.Fatalf("%s's state has seen %d messages; want %d", hop.name, len(st.Seen), len(ids)+1)
		}
		ids = append(ids, st.Seen[len(st.Seen)-1])
		state = next
	}
	// Back in Go, in another client: the next message, none of the three.
	var st client.State
	if err := json.Unmarshal(state, &st); err != nil {
		t.Fatal(err)
	}
	c, _ := client.New(s.api)
	back, err := c.Restore(st)
	if err != nil {
		t.Fatal(err)
	}
	sendMail(t, s.smtp, addr, codeMail(addr, "back in Go", "300003"))
	msg, err := back.WaitForMessage(ctx, client.Match{})
	if err != nil || msg.Subject != "back in Go" {
		t.Fatalf("Go restored the TypeScript state and read %q, %v; want \"back in Go\"", msg.Subject, err)
	}
	if final := back.State().Seen; len(final) != 4 || final[0] != ids[0] || final[3] != msg.ID {
		t.Fatalf("seen after the round trip = %q; want the four messages in order", final)
	}
	// The inbox is the same one throughout: its cookies still work.
	if _, err := back.Current(ctx); err != nil {
		t.Fatalf("Current on the restored inbox: %v", err)
	}
}
