package cli

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"

	client "github.com/mayfly/mayfly/clients/go"
)

// TestJarSaveRaceRemove: an invocation that saves its inbox (create=false:
// only if the jar still holds it) while another removes that inbox never
// brings the entry back, whichever runs first. It is what TestCLI's events
// and delete do at the same moment.
func TestJarSaveRaceRemove(t *testing.T) {
	st := client.State{Mailbox: client.Mailbox{ID: "a37bee30-0000-4000-8000-000000000001", Address: "x@mayfly.test"}}
	for i := range 300 {
		path := filepath.Join(t.TempDir(), "jar.json")
		if err := saveEntry(path, DefaultName, st, true); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); _ = saveEntry(path, DefaultName, st, false) }()
		go func() { defer wg.Done(); _ = removeEntry(path, DefaultName, st.Mailbox) }()
		wg.Wait()
		if _, ok, err := loadEntry(path, DefaultName); ok || err != nil {
			t.Fatalf("round %d: the removed inbox is back in the jar (%v)", i, err)
		}
		if _, ok := deletedEntry(path, DefaultName); !ok {
			t.Fatalf("round %d: the jar does not remember the deletion", i)
		}
		if _, err := os.Stat(path + ".lock"); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("round %d: the lock file was left behind", i)
		}
	}
}
