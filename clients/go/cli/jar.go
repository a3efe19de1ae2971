package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	client "github.com/mayfly/mayfly/clients/go"
)

// jarFile is the jar file: named inboxes, each an inbox's client.State
// (its cookies: secrets, hence mode 0600).
type jarFile struct {
	Inboxes map[string]client.State `json:"inboxes"`
	// Deleted remembers the inboxes `delete` removed, by name, so that a
	// later command on that name says it was deleted.
	Deleted map[string]deletion `json:"deleted,omitempty"`
}

// deletion is an inbox the tool deleted.
type deletion struct {
	Address string    `json:"address"`
	At      time.Time `json:"at"`
}

// loadJar reads the jar; a missing file is an empty jar. A jar of the
// earlier layout (one inbox's State) reads as the inbox "default".
func loadJar(path string) (jarFile, error) {
	j := jarFile{Inboxes: map[string]client.State{}, Deleted: map[string]deletion{}}
	raw, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return j, nil
	}
	if err != nil {
		return j, fmt.Errorf("jar: %w", err)
	}
	var probe struct {
		Inboxes map[string]client.State `json:"inboxes"`
		Deleted map[string]deletion     `json:"deleted"`
		Mailbox *client.Mailbox         `json:"mailbox"`
	}
	if err := json.Unmarshal(raw, &probe); err != nil {
		return j, fmt.Errorf("jar %s is not a jar: %v", path, err)
	}
	if probe.Mailbox != nil {
		var st client.State
		if err := json.Unmarshal(raw, &st); err != nil {
			return j, fmt.Errorf("jar %s is not a jar: %v", path, err)
		}
		j.Inboxes[DefaultName] = st
		return j, nil
	}
	for name, st := range probe.Inboxes {
		j.Inboxes[name] = st
	}
	for name, d := range probe.Deleted {
		j.Deleted[name] = d
	}
	return j, nil
}

// deletedEntry is the record of the inbox of that name `delete` removed.
func deletedEntry(path, name string) (deletion, bool) {
	j, err := loadJar(path)
	if err != nil {
		return deletion{}, false
	}
	d, ok := j.Deleted[name]
	return d, ok
}

func loadEntry(path, name string) (client.State, bool, error) {
	j, err := loadJar(path)
	if err != nil {
		return client.State{}, false, err
	}
	st, ok := j.Inboxes[name]
	return st, ok && st.Mailbox.ID != "", nil
}

// saveEntry writes one inbox into the jar, keeping the others as the file
// holds them now (another invocation may have changed them meanwhile).
// Unless create is set, it only updates the entry of the same inbox: one
// that another invocation deleted or replaced meanwhile stays so.
func saveEntry(path, name string, st client.State, create bool) error {
	return updateJar(path, func(j *jarFile) bool {
		if cur, ok := j.Inboxes[name]; !create && (!ok || cur.Mailbox.ID != st.Mailbox.ID) {
			return false
		}
		j.Inboxes[name] = st
		delete(j.Deleted, name)
		return true
	})
}

// removeEntry forgets the inbox of that name, remembering that it was
// deleted (the inbox's id must match: another invocation may have replaced
// it meanwhile).
func removeEntry(path, name string, deleted client.Mailbox) error {
	return updateJar(path, func(j *jarFile) bool {
		if cur, ok := j.Inboxes[name]; ok && cur.Mailbox.ID != deleted.ID {
			return false
		}
		delete(j.Inboxes, name)
		j.Deleted[name] = deletion{Address: deleted.Address, At: time.Now().UTC()}
		return true
	})
}

// updateJar reads the jar, lets change edit it, and writes it back if change
// says so (an empty jar is removed), all under the jar's lock.
func updateJar(path string, change func(*jarFile) bool) error {
	unlock, err := lockJar(path)
	if err != nil {
		return err
	}
	defer unlock()
	j, err := loadJar(path)
	if err != nil {
		return err
	}
	if !change(&j) {
		return nil
	}
	if len(j.Inboxes) == 0 && len(j.Deleted) == 0 {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("jar: %w", err)
		}
		return nil
	}
	return writeJar(path, j)
}

// staleLock is the age past which a jar lock is taken to be a crashed
// invocation's: a read-modify-write of the jar takes milliseconds.
const staleLock = 10 * time.Second

// lockJar serialises the read-modify-write of the jar between invocations,
// with a lock file beside it, created exclusively (portable, unlike flock).
// Without it, an `events` that ends because a `delete` removed its inbox
// reads the jar just before the delete removes it and writes it back just
// after: the deleted inbox's entry returns.
func lockJar(path string) (unlock func(), err error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("jar: %w", err)
	}
	lock := path + ".lock"
	deadline := time.Now().Add(5 * time.Second)
	for {
		f, err := os.OpenFile(lock, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if err == nil {
			f.Close()
			return func() { os.Remove(lock) }, nil
		}
		if !errors.Is(err, os.ErrExist) {
			return nil, fmt.Errorf("jar lock: %w", err)
		}
		if fi, err := os.Stat(lock); err == nil && time.Since(fi.ModTime()) > staleLock {
			os.Remove(lock) // left by an invocation that died holding it
			continue
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("jar %s is locked by another invocation (remove %s if none is running)", path, lock)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// writeJar writes j to path with mode 0600, atomically (a temporary file in
// the same directory, renamed over it).
func writeJar(path string, j jarFile) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("jar: %w", err)
	}
	raw, err := json.MarshalIndent(j, "", "  ")
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
