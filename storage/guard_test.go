package storage_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/mayfly/mayfly/storage"
	"github.com/mayfly/mayfly/storage/storagetest"
)

type guardEnv struct {
	client rueidis.Client
	prefix string
	ctx    context.Context
}

func newGuardEnv(t *testing.T) guardEnv {
	t.Helper()
	t.Parallel()
	return guardEnv{client: storagetest.Client(t), prefix: storagetest.Prefix(t), ctx: ctxT(t)}
}

func (e guardEnv) guard(t *testing.T, node, setting string) *storage.LayoutGuard {
	t.Helper()
	g, err := storage.NewLayoutGuard(e.client, storage.GuardConfig{KeyPrefix: e.prefix, Setting: setting, Node: node, Version: "v-" + node, Every: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func (e guardEnv) check(t *testing.T, node, setting string) (string, error) {
	t.Helper()
	return e.guard(t, node, setting).Check(e.ctx)
}

func (e guardEnv) hset(t *testing.T, field, value string) {
	t.Helper()
	if err := e.client.Do(e.ctx, e.client.B().Hset().Key(e.prefix+":layout-guard").FieldValue().FieldValue(field, value).Build()).Error(); err != nil {
		t.Fatal(err)
	}
}

func (e guardEnv) fleet(t *testing.T) string {
	t.Helper()
	w, err := e.client.Do(e.ctx, e.client.B().Hget().Key(e.prefix+":layout-guard").Field("w").Build()).ToString()
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func want(t *testing.T, what string, got string, err error, layout string) {
	t.Helper()
	if err != nil || got != layout {
		t.Fatalf("%s: %q, %v; want %q", what, got, err, layout)
	}
}

// A fresh cluster writes the newest layout; one that Mayfly used before the
// guard (release 2026-11-24) writes that release's layout until a node is
// told to write a newer one, and then every node that follows the fleet
// writes it too.
func TestLayoutGuardStarts(t *testing.T) {
	t.Run("fresh", func(t *testing.T) {
		e := newGuardEnv(t)
		got, err := e.check(t, "a", "")
		want(t, "fresh cluster", got, err, storage.LayoutCurrent)
	})
	t.Run("used by 2026-11-24", func(t *testing.T) {
		e := newGuardEnv(t)
		if err := e.client.Do(e.ctx, e.client.B().Set().Key(e.prefix+":{x}:box").Value("1").Build()).Error(); err != nil {
			t.Fatal(err)
		}
		got, err := e.check(t, "a", "")
		want(t, "used cluster, no setting", got, err, storage.Layout20261124)
		got, err = e.check(t, "b", storage.Layout20261124)
		want(t, "set to 2026-11-24", got, err, storage.Layout20261124)
		if w := e.fleet(t); w != storage.Layout20261124 {
			t.Fatalf("fleet = %q before the flip", w)
		}
		got, err = e.check(t, "c", storage.Layout20261125)
		want(t, "the flip", got, err, storage.Layout20261125)
		if w := e.fleet(t); w != storage.Layout20261125 {
			t.Fatalf("fleet = %q after the flip", w)
		}
		got, err = e.check(t, "a", "")
		want(t, "a node without a setting after the flip", got, err, storage.Layout20261125)
		got, err = e.check(t, "b", storage.Layout20261124)
		want(t, "a node still set to 2026-11-24", got, err, storage.Layout20261124)
	})
}

// A node is refused the layout it is told to write while a live node of the
// fleet cannot read it (a release that reads only 2026-11-24 and keeps a
// registration), and a node refuses to start when the fleet writes a layout
// it cannot read; each refusal says what to do. A registration that ended
// does not count.
func TestLayoutGuardRefuses(t *testing.T) {
	t.Run("a node cannot read it", func(t *testing.T) {
		e := newGuardEnv(t)
		if _, err := e.check(t, "a", storage.Layout20261124); err != nil {
			t.Fatal(err)
		}
		until := strconv.FormatInt(time.Now().Add(time.Minute).UnixMilli(), 10)
		e.hset(t, "n:old-1", "2026-11-24 "+until+" 2026-11-24 v2026.11.24")
		_, err := e.check(t, "b", storage.Layout20261125)
		if !errors.Is(err, storage.ErrLayoutRefused) || !strings.Contains(err.Error(), "node old-1 (version v2026.11.24) reads layouts up to 2026-11-24") {
			t.Fatalf("flip while a node reads only 2026-11-24: %v", err)
		}
		if w := e.fleet(t); w != storage.Layout20261124 {
			t.Errorf("fleet = %q after a refused flip", w)
		}
		// Its registration ends (a node killed without leaving): the flip
		// goes through.
		e.hset(t, "n:old-1", "2026-11-24 1 2026-11-24 v2026.11.24")
		got, err := e.check(t, "b", storage.Layout20261125)
		want(t, "flip after the registration ended", got, err, storage.Layout20261125)
	})
	t.Run("the fleet writes what it cannot read", func(t *testing.T) {
		e := newGuardEnv(t)
		if _, err := e.check(t, "a", ""); err != nil {
			t.Fatal(err)
		}
		e.hset(t, "w", "2099-01-01")
		for _, setting := range []string{"", storage.Layout20261125} {
			_, err := e.check(t, "b", setting)
			if !errors.Is(err, storage.ErrLayoutRefused) || !strings.Contains(err.Error(), "the fleet writes layout 2099-01-01") {
				t.Fatalf("setting %q while the fleet writes 2099-01-01: %v", setting, err)
			}
		}
	})
	t.Run("unknown setting", func(t *testing.T) {
		e := newGuardEnv(t)
		if _, err := storage.NewLayoutGuard(e.client, storage.GuardConfig{KeyPrefix: e.prefix, Setting: "2026-11-23"}); !errors.Is(err, storage.ErrLayoutRefused) {
			t.Fatalf("setting 2026-11-23: %v", err)
		}
	})
}

// The fleet's layout comes back down (a rollback of the flip) only once no
// live node writes it and nothing has for the longest life of its data.
func TestLayoutGuardComesDown(t *testing.T) {
	e := newGuardEnv(t)
	if _, err := e.check(t, "a", storage.Layout20261125); err != nil {
		t.Fatal(err)
	}
	g := e.guard(t, "a", storage.Layout20261125)
	if _, err := g.Check(e.ctx); err != nil {
		t.Fatal(err)
	}
	got, err := e.check(t, "b", storage.Layout20261124)
	want(t, "a node set back", got, err, storage.Layout20261124)
	if w := e.fleet(t); w != storage.Layout20261125 {
		t.Fatalf("fleet = %q while node a writes 2026-11-25", w)
	}
	if err := g.Leave(e.ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := e.check(t, "b", storage.Layout20261124); err != nil {
		t.Fatal(err)
	}
	if w := e.fleet(t); w != storage.Layout20261125 {
		t.Fatalf("fleet = %q right after the last writer of 2026-11-25 left: its data lives on", w)
	}
	e.hset(t, "lw:2026-11-25", strconv.FormatInt(time.Now().Add(-62*time.Minute).UnixMilli(), 10))
	if _, err := e.check(t, "b", storage.Layout20261124); err != nil {
		t.Fatal(err)
	}
	if w := e.fleet(t); w != storage.Layout20261124 {
		t.Fatalf("fleet = %q 62 minutes after the last write of 2026-11-25", w)
	}
}

// A node without a setting follows the fleet while it runs.
func TestLayoutGuardRunFollows(t *testing.T) {
	e := newGuardEnv(t)
	if err := e.client.Do(e.ctx, e.client.B().Set().Key(e.prefix+":used").Value("1").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	g := e.guard(t, "auto", "")
	got, err := g.Check(e.ctx)
	want(t, "start", got, err, storage.Layout20261124)
	applied := make(chan string, 4)
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	go g.Run(ctx, func(l string) { applied <- l })
	if _, err := e.check(t, "flip", storage.Layout20261125); err != nil {
		t.Fatal(err)
	}
	select {
	case l := <-applied:
		if l != storage.Layout20261125 || g.Write() != l {
			t.Fatalf("applied %q, Write() %q", l, g.Write())
		}
	case <-e.ctx.Done():
		t.Fatal("the node without a setting did not follow the flip")
	}
}

// The limiter's folds (storage.LayoutFold): on a fresh cluster they decide
// at once; raised to from an older layout, they mirror for a day and a
// minute (storage.FoldMirror) from the raise, which the nodes that follow
// do not move; once the fleet's layout comes back down, no fold is written.
func TestLayoutGuardFold(t *testing.T) {
	t.Run("fresh", func(t *testing.T) {
		e := newGuardEnv(t)
		before := time.Now()
		g := e.guard(t, "a", "")
		got, err := g.Check(e.ctx)
		want(t, "fresh cluster", got, err, storage.LayoutCurrent)
		if f := g.FoldDecides(); f.Before(before.Add(-time.Minute-time.Second)) || f.After(time.Now().Add(-time.Minute+time.Second)) {
			t.Fatalf("FoldDecides = %v on a fresh cluster, want a minute ago (at once, whatever the node's clock)", f)
		}
	})
	t.Run("raised and lowered", func(t *testing.T) {
		e := newGuardEnv(t)
		if err := e.client.Do(e.ctx, e.client.B().Set().Key(e.prefix+":{x}:box").Value("1").Build()).Error(); err != nil {
			t.Fatal(err)
		}
		old := e.guard(t, "old", storage.Layout20261127)
		got, err := old.Check(e.ctx)
		want(t, "before the fold", got, err, storage.Layout20261127)
		if f := old.FoldDecides(); !f.IsZero() {
			t.Fatalf("FoldDecides = %v before the fold layout", f)
		}
		before := time.Now()
		raiser := e.guard(t, "new", storage.LayoutFold)
		got, err = raiser.Check(e.ctx)
		want(t, "the raise", got, err, storage.LayoutFold)
		f := raiser.FoldDecides()
		if lo, hi := before.Add(storage.FoldMirror-time.Second), time.Now().Add(storage.FoldMirror+time.Second); f.Before(lo) || f.After(hi) {
			t.Fatalf("FoldDecides = %v after the raise, want a day and a minute on (%v–%v)", f, lo, hi)
		}
		follower := e.guard(t, "follower", "")
		got, err = follower.Check(e.ctx)
		want(t, "a follower", got, err, storage.LayoutFold)
		if g := follower.FoldDecides(); !g.Equal(f) {
			t.Fatalf("a follower reads FoldDecides %v, want the raise's %v", g, f)
		}
		// Down again: the fold layout's writers gone for longer than the hold.
		for _, g := range []*storage.LayoutGuard{raiser, follower} {
			if err := g.Leave(e.ctx); err != nil {
				t.Fatal(err)
			}
		}
		e.hset(t, "lw:"+storage.LayoutFold, "1")
		got, err = old.Check(e.ctx)
		want(t, "lowered", got, err, storage.Layout20261127)
		if w := e.fleet(t); w != storage.Layout20261127 {
			t.Fatalf("fleet = %q, want lowered to 2026-11-27", w)
		}
		if f := old.FoldDecides(); !f.IsZero() {
			t.Fatalf("FoldDecides = %v after the fleet's layout came down, want none", f)
		}
	})
}
