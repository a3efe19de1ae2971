package storage

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
)

// ErrLayoutRefused is the layout guard's refusal: writing the layout would
// leave a node of the fleet unable to read what is written, or this node
// cannot read what the fleet writes. Its text says what to do.
var ErrLayoutRefused = errors.New("storage: layout guard")

// GuardConfig configures a LayoutGuard. Zero values mean the defaults.
type GuardConfig struct {
	KeyPrefix string // default "mf", as Config
	// Setting is the layout this node is told to write (one of Layouts),
	// or "" to write the layout the fleet writes.
	Setting string
	// Version names this node's release in the guard (and in refusals).
	Version string
	// Node names this node in the guard; default host name, process id and
	// a random suffix.
	Node string
	// Every is how often the node registers again and reads the fleet's
	// layout (default 10 s); a registration lasts three of them.
	Every time.Duration
	// Logger gets layout changes and refresh failures; nil logs nothing.
	Logger *slog.Logger
}

// LayoutGuard keeps the fleet's nodes agreeing on the layout they write
// (docs/UPGRADING.md). It is one hash in Redis (keys.guard) that records
// the layout the fleet writes and each live node of this release or later:
// which layouts it reads and which it writes. A node writes the layout its
// Setting names only when every live node reads it; with no Setting it
// writes what the fleet writes, and follows when that changes. A node that
// cannot read what the fleet writes refuses to start. Nodes of release
// 2026-11-24 (before the guard) are not in it: on a cluster they used, the
// guard starts at their layout, and the operator raises it only after the
// last of them is gone.
type LayoutGuard struct {
	client rueidis.Client
	cfg    GuardConfig
	key    string
	script *rueidis.Lua
	write  atomic.Pointer[string]
	fleet  atomic.Pointer[string]
	fold   atomic.Int64 // ms from which the limiter's folds decide; 0: none
}

// Timings of the guard: how long a registration lasts past its refresh,
// how long the guard outlives its last node (longer than any key Mayfly
// writes: a day window), and how long a layout's data outlives its last
// writer (the longest-lived mailbox data, MaxLifetime, and a minute).
const (
	guardKeep = 25 * time.Hour
	guardHold = MaxLifetime + time.Minute
	// FoldMirror is how long the limiter's folds (LayoutFold) only mirror
	// the older keys after the fleet's layout was raised to LayoutFold: a
	// day window and a minute, for the nodes to follow the raise. By then
	// every creation window still open was counted in the folds.
	FoldMirror = 24*time.Hour + time.Minute
)

// NewLayoutGuard returns a guard; it refuses a Setting outside Layouts.
func NewLayoutGuard(client rueidis.Client, cfg GuardConfig) (*LayoutGuard, error) {
	if cfg.Setting != "" && !ValidLayout(cfg.Setting) {
		return nil, fmt.Errorf("%w: unknown layout %q: this release writes %s", ErrLayoutRefused, cfg.Setting, strings.Join(Layouts, " or "))
	}
	if cfg.KeyPrefix == "" {
		cfg.KeyPrefix = "mf"
	}
	if cfg.Every <= 0 {
		cfg.Every = 10 * time.Second
	}
	if cfg.Node == "" {
		host, _ := os.Hostname()
		var b [4]byte
		_, _ = rand.Read(b[:])
		cfg.Node = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
	}
	if cfg.Version == "" {
		cfg.Version = "unknown"
	}
	g := &LayoutGuard{client: client, cfg: cfg, key: keys{prefix: cfg.KeyPrefix}.guard(),
		script: rueidis.NewLuaScript(mustRead("lib.lua") + mustRead("guard.lua"))}
	return g, nil
}

// Write is the layout the node writes, as last decided; "" before Check.
func (g *LayoutGuard) Write() string { return load(&g.write) }

// Fleet is the layout the fleet writes, as last read; "" before Check.
func (g *LayoutGuard) Fleet() string { return load(&g.fleet) }

// FoldDecides is when the limiter's folds start deciding (ratelimit's
// SetFold), as last read: a day and a minute after the fleet's layout was
// raised to LayoutFold, or when the guard was started at it. Zero while
// the fleet writes an older layout: then no fold is written.
func (g *LayoutGuard) FoldDecides() time.Time {
	if ms := g.fold.Load(); ms > 0 {
		return time.UnixMilli(ms)
	}
	return time.Time{}
}

func load(p *atomic.Pointer[string]) string {
	if s := p.Load(); s != nil {
		return *s
	}
	return ""
}

// Check registers the node and decides the layout it writes.
// Errors: ErrLayoutRefused (with what to do), ErrUnavailable.
func (g *LayoutGuard) Check(ctx context.Context) (string, error) {
	start := ""
	n, err := g.client.Do(ctx, g.client.B().Exists().Key(g.key).Build()).AsInt64()
	if err != nil {
		return "", unavailable("layout guard", err)
	}
	if n == 0 {
		used, err := g.used(ctx)
		if err != nil {
			return "", unavailable("layout guard", err)
		}
		// A cluster with Mayfly's keys and no guard was written by the
		// release before the guard: start at its layout. A fresh one
		// starts at the newest.
		start = LayoutCurrent
		if used {
			start = Layout20261124
		}
	}
	reads, oldest := Layouts[len(Layouts)-1], Layouts[0]
	res, err := g.script.Exec(ctx, g.client, []string{g.key}, []string{
		g.cfg.Node, reads, oldest, g.cfg.Setting, g.cfg.Version, start,
		ms(3 * g.cfg.Every), ms(guardKeep), ms(guardHold), LayoutFold, ms(FoldMirror),
	}).ToArray()
	if err != nil {
		return "", unavailable("layout guard", err)
	}
	str := func(i int) string {
		if i >= len(res) {
			return ""
		}
		s, _ := res[i].ToString()
		return s
	}
	code, _ := res[0].AsInt64()
	switch code {
	case 1:
		write, fleet := str(1), str(2)
		var fold int64
		if len(res) > 3 {
			fold, _ = res[3].AsInt64()
		}
		g.fold.Store(fold)
		g.write.Store(&write)
		g.fleet.Store(&fleet)
		return write, nil
	case 0:
		return "", fmt.Errorf("%w: MAYFLY_STORAGE_WRITE_LAYOUT=%s, but node %s (version %s) reads layouts up to %s: "+
			"finish rolling every node to a release that reads %s, then start this one again; or write %s until then",
			ErrLayoutRefused, str(1), str(2), str(4), str(3), str(1), str(3))
	case 2:
		return "", fmt.Errorf("%w: the fleet writes layout %s, which this release (version %s, reads %s) cannot read: "+
			"run a release that reads %s; to roll back to this one, first set MAYFLY_STORAGE_WRITE_LAYOUT=%s on every node "+
			"and wait %v after the last node stopped writing %s (docs/UPGRADING.md)",
			ErrLayoutRefused, str(1), g.cfg.Version, strings.Join(Layouts, ", "), str(1), reads, guardHold, str(1))
	case 3:
		return "", fmt.Errorf("%w: MAYFLY_STORAGE_WRITE_LAYOUT=%s is older than this release reads (%s)",
			ErrLayoutRefused, str(1), strings.Join(Layouts, ", "))
	}
	return "", unavailable("layout guard", fmt.Errorf("unexpected reply %v", res))
}

// Run registers the node again every cfg.Every until ctx ends, and calls
// apply when the layout it writes, the fleet's or FoldDecides changes (a
// node without a Setting follows the fleet). A refusal or an unreachable
// Redis keeps the last layout: it is logged, and the node goes on writing
// what every node read when it was decided.
func (g *LayoutGuard) Run(ctx context.Context, apply func(layout string)) {
	t := time.NewTicker(g.cfg.Every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		before, fleet, fold := g.Write(), g.Fleet(), g.fold.Load()
		cctx, cancel := context.WithTimeout(ctx, g.cfg.Every)
		write, err := g.Check(cctx)
		cancel()
		if err != nil {
			if g.cfg.Logger != nil && ctx.Err() == nil {
				g.cfg.Logger.Warn("storage layout guard", "err", err, "writes", before)
			}
			continue
		}
		if write != before {
			if g.cfg.Logger != nil {
				g.cfg.Logger.Info("storage layout changed", "from", before, "to", write, "fleet", g.Fleet())
			}
		}
		if write != before || g.Fleet() != fleet || g.fold.Load() != fold {
			apply(write)
		}
	}
}

// Leave takes the node out of the guard (on shutdown), so that a layout it
// does not read can be written without waiting for its registration to end.
func (g *LayoutGuard) Leave(ctx context.Context) error {
	return g.client.Do(ctx, g.client.B().Hdel().Key(g.key).Field("n:"+g.cfg.Node).Build()).Error()
}

// used reports whether any node of the cluster holds a key under the
// prefix. It scans until it finds one, at most guardScanLimit keys a node
// (a larger cluster of other keys counts as used: the safe answer).
func (g *LayoutGuard) used(ctx context.Context) (bool, error) {
	match := globEscaper.Replace(g.cfg.KeyPrefix) + ":*"
	for _, node := range g.client.Nodes() {
		cursor, seen := uint64(0), 0
		for {
			e, err := node.Do(ctx, node.B().Scan().Cursor(cursor).Match(match).Count(1000).Build()).AsScanEntry()
			if err != nil {
				return false, err
			}
			if len(e.Elements) > 0 {
				return true, nil
			}
			seen += 1000
			cursor = e.Cursor
			if cursor == 0 {
				break
			}
			if seen >= guardScanLimit {
				return true, nil
			}
		}
	}
	return false, nil
}

const guardScanLimit = 10_000_000

// globEscaper quotes the characters SCAN's MATCH pattern gives a meaning.
var globEscaper = strings.NewReplacer(`\`, `\\`, "*", `\*`, "?", `\?`, "[", `\[`, "]", `\]`)

func ms(d time.Duration) string { return fmt.Sprint(d.Milliseconds()) }
