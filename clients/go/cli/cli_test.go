package cli

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// TestNewExplainsCreationLimit: `new` refused by a creation limit is one
// request (never retried), exit 1, and the message names the window, the
// wait and the way out, as the clients' error does.
func TestNewExplainsCreationLimit(t *testing.T) {
	var posts atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		posts.Add(1)
		w.Header().Set("Retry-After", "3540")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		io.WriteString(w, `{"error":{"code":"CREATION_RATE_LIMITED","message":"Too many mailboxes created from this address; wait for the window to reset."},"request_id":"r1"}`)
	}))
	defer srv.Close()
	env := map[string]string{"MAYFLY_URL": srv.URL + "/v1", "XDG_STATE_HOME": t.TempDir()}
	var errw bytes.Buffer
	code := Main("mayfly inbox", []string{"--jar", filepath.Join(t.TempDir(), "jar.json"), "new"},
		func(k string) string { return env[k] }, io.Discard, &errw)
	if code != ExitError || posts.Load() != 1 {
		t.Fatalf("new against a spent creation window: exit %d after %d requests; want %d after one", code, posts.Load(), ExitError)
	}
	for _, want := range []string{"this IP's hour of creations", "retry in 3540 s", "a shared inbox and tagged addresses"} {
		if !strings.Contains(errw.String(), want) {
			t.Errorf("%q does not say %q", errw.String(), want)
		}
	}
}
