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
}

// loadJar reads the jar; a missing file is an empty jar. A jar of the
// earlier layout (one inbox's State) reads as the inbox "default".
func loadJar(path string) (jarFile, error) {
	j := jarFile{Inboxes: map[string]client.State{}}
	raw, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return j, nil
	}
	if err != nil {
		return j, fmt.Errorf("jar: %w", err)
	}
	var probe struct {
		Inboxes map[string]client.State `json:"inboxes"`
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
	return j, nil
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
	unlock, err := lockJar(path)
	if err != nil {
		return err
	}
	defer unlock()
	j, err := loadJar(path)
	if err != nil {
		return err
	}
	if cur, ok := j.Inboxes[name]; !create && (!ok || cur.Mailbox.ID != st.Mailbox.ID) {
		return nil
	}
	j.Inboxes[name] = st
	return writeJar(path, j)
}

func removeEntry(path, name string) error {
	unlock, err := lockJar(path)
	if err != nil {
		return err
	}
	defer unlock()
	j, err := loadJar(path)
	if err != nil {
		return err
	}
	delete(j.Inboxes, name)
	if len(j.Inboxes) == 0 {
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
