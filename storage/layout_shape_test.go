package storage_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/rueidis"

	"github.com/mayfly/mayfly/ratelimit"
	"github.com/mayfly/mayfly/storage"
	"github.com/mayfly/mayfly/storage/storagetest"
)

var updateLayouts = flag.Bool("update-layouts", false, "rewrite storage/testdata/layouts/*.txt from what each layout writes now")

// TestLayoutShapes is the gate on layout changes: it runs every kind of
// write Mayfly makes (a creation reserved, a mailbox created, selected
// twice, extended, two deliveries and a duplicate, one to a sub-address
// where the layout has them, a stream opened, the
// request, SMTP and global counters) with the store and the limiter
// writing each layout of storage.Layouts, and compares the shape of what
// landed in Redis (every key with its type and TTL, every field and the
// form of its value, tags, ids and digests replaced by their kind) with
// testdata/layouts/<layout>.txt. A script that starts writing something
// else fails here: that is a new layout, which needs a new name in
// storage.Layouts, readers for it in every script, a golden file of its
// own (go test ./storage -run TestLayoutShapes -update-layouts) and the
// upgrade drill (docs/UPGRADING.md). Changing an existing layout's golden
// file instead breaks every node of the release that wrote it.
func TestLayoutShapes(t *testing.T) {
	files, err := filepath.Glob("testdata/layouts/*.txt")
	if err != nil {
		t.Fatal(err)
	}
	var named []string
	for _, f := range files {
		named = append(named, strings.TrimSuffix(filepath.Base(f), ".txt"))
	}
	if !*updateLayouts && !slices.Equal(named, storage.Layouts) {
		t.Errorf("testdata/layouts holds %v, storage.Layouts is %v: every layout a node may write has its golden file, and only those", named, storage.Layouts)
	}
	for _, layout := range storage.Layouts {
		t.Run(layout, func(t *testing.T) {
			got := writeEverything(t, layout)
			file := filepath.Join("testdata", "layouts", layout+".txt")
			if *updateLayouts {
				if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				t.Errorf("layout %s writes something else than %s: a change to what is written is a new layout "+
					"(a new name in storage.Layouts and its own golden file; docs/UPGRADING.md).\n--- got\n%s\n--- want\n%s",
					layout, file, got, want)
			}
		})
	}
}

// writeEverything makes every kind of write in layout and returns the
// shape of what it left in Redis.
func writeEverything(t *testing.T, layout string) string {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	client := storagetest.Client(t)
	prefix := storagetest.Prefix(t)
	store := storage.New(client, storage.Config{KeyPrefix: prefix, MaxMessages: 2, WriteLayout: layout})
	if got := store.WriteLayout(); got != layout {
		t.Fatalf("WriteLayout() = %q, want %q", got, layout)
	}
	lim := ratelimit.New(client, ratelimit.Config{KeyPrefix: prefix})
	lim.SetZSetSlots(layout == storage.Layout20261124)
	lim.SetNetworkShares(layout >= storage.Layout20261126)
	// The folds as they decide (a fresh cluster; a day after a raise).
	// While they mirror, a fleet writes this and the previous layout's
	// limiter keys (TestFoldMirrorsThenDecides in ratelimit).
	lim.SetFold(layout >= storage.LayoutFold, time.Time{})
	const ip = "203.0.113.7"
	tag := storage.NewTag()
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	d, err := lim.ReserveCreation(ctx, ip, tag, 10*time.Minute, true)
	must("reserve", err)
	if !d.Allowed {
		t.Fatalf("reserve refused: %+v", d)
	}
	_, err = lim.AllowRequest(ctx, ip)
	must("request", err)
	_, err = lim.AllowGlobalCreation(ctx)
	must("global", err)
	_, err = lim.Allow(ctx, ratelimit.Rule{Name: "smtp-conn", Limit: 60, Window: time.Minute}, ip)
	must("smtp rule", err)
	m, scoped, err := store.Create(ctx, tag, "mayfly.test", 10*time.Minute, ip)
	must("create", err)
	_, _, err = store.Select(ctx, m.ID, scoped)
	must("select", err)
	_, sess, err := store.Select(ctx, m.ID, scoped)
	must("select", err)
	_, _, err = store.Extend(ctx, sess, time.Minute)
	must("extend", err)
	must("extend slot", lim.ExtendActive(ctx, ip, tag, m.ExpiresAt.Add(time.Minute)))
	msg := func(subject, key string) storage.NewMessage {
		return storage.NewMessage{From: "a@example.org", Subject: subject, Status: storage.StatusReady,
			Text: "code 123456", HTML: "<p>code</p>", Key: key}
	}
	key := storage.DeliveryKey([]byte("raw message one"))
	for i, n := range []storage.NewMessage{msg("one", key), msg("one", key), msg("two", ""), msg("three", storage.DeliveryKey([]byte("three")))} {
		if i == 2 && layout >= storage.Layout20261127 {
			// A sub-address: the same bytes again, stored under a key of
			// its own (and evicted by the next two, as the oldest).
			_, err := store.Deliver(ctx, m.Tag()+"+signup@mayfly.test", msg("one", key))
			must("deliver to a sub-address", err)
		}
		_, err := store.Deliver(ctx, m.Address, n)
		must("deliver", err)
	}
	_, err = store.OpenStream(ctx, sess, "token-1", uuid.Nil, 10)
	must("open stream", err)
	guard, err := storage.NewLayoutGuard(client, storage.GuardConfig{KeyPrefix: prefix, Setting: layout, Version: "test", Node: "node-1"})
	must("guard", err)
	_, err = guard.Check(ctx)
	must("guard", err)
	return shapeOf(t, ctx, client, prefix, tag, ip)
}

// shapeOf describes every key under prefix, one line each, sorted.
func shapeOf(t *testing.T, ctx context.Context, c rueidis.Client, prefix, tag, ip string) string {
	t.Helper()
	var lines []string
	for _, k := range storagetest.Leftovers(t, prefix) {
		name := strings.NewReplacer(prefix, "<prefix>", "{"+tag+"}", "{<tag>}", "{"+ip+"}", "{<client>}").Replace(k)
		tag := tag + "|" + ip
		name = regexp.MustCompile(`:\d{6,}$`).ReplaceAllString(name, ":<window>")
		typ, err := c.Do(ctx, c.B().Type().Key(k).Build()).ToString()
		if err != nil {
			t.Fatal(err)
		}
		ttl, err := c.Do(ctx, c.B().Pttl().Key(k).Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		life := "ttl"
		if ttl < 0 {
			life = "NO-TTL"
		}
		var parts []string
		switch typ {
		case "hash":
			h, err := c.Do(ctx, c.B().Hgetall().Key(k).Build()).AsStrMap()
			if err != nil {
				t.Fatal(err)
			}
			for f, v := range h {
				parts = append(parts, kindOf(f, tag)+"="+kindOf(v, tag))
			}
		case "zset":
			z, err := c.Do(ctx, c.B().Zrange().Key(k).Min("0").Max("-1").Withscores().Build()).AsZScores()
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range z {
				parts = append(parts, kindOf(e.Member, tag)+"=<score>")
			}
		case "stream":
			x, err := c.Do(ctx, c.B().Xrange().Key(k).Start("-").End("+").Build()).AsXRange()
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range x {
				var fs []string
				for f, v := range e.FieldValues {
					fs = append(fs, f+"="+kindOf(v, tag))
				}
				sort.Strings(fs)
				parts = append(parts, "entry("+strings.Join(fs, ",")+")")
			}
		case "string":
			v, err := c.Do(ctx, c.B().Get().Key(k).Build()).ToString()
			if err != nil {
				t.Fatal(err)
			}
			parts = append(parts, kindOf(v, tag))
		}
		sort.Strings(parts)
		parts = slices.Compact(parts)
		lines = append(lines, fmt.Sprintf("%s %s %s: %s", name, typ, life, strings.Join(parts, " ")))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n") + "\n"
}

var (
	uuidRE   = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	hex64RE  = regexp.MustCompile(`^[0-9a-f]{64}$`)
	sidRE    = regexp.MustCompile(`^\d+-\d+$`)
	intRE    = regexp.MustCompile(`^-?\d+$`)
	metaRE   = regexp.MustCompile(`^(\d+-\d+) (\d+)( .*)?$`)
	sizeRE   = regexp.MustCompile(`^\d+ [0-9a-f]{64}$`)
	nodeRE   = regexp.MustCompile(`^\d{4}-\d\d-\d\d \d+ \d{4}-\d\d-\d\d \S*$`)
	layoutRE = regexp.MustCompile(`^\d{4}-\d\d-\d\d$`)
)

// kindOf names what s is without its value: a JSON object by its members'
// names, a stream id, a number, a digest or id by its form.
func kindOf(s, tag string) string {
	switch {
	case strings.HasPrefix(s, "{") && json.Valid([]byte(s)):
		var v map[string]json.RawMessage
		if err := json.Unmarshal([]byte(s), &v); err != nil {
			return "<json>"
		}
		var names []string
		for n := range v {
			names = append(names, n)
		}
		sort.Strings(names)
		return "json{" + strings.Join(names, ",") + "}"
	case sidRE.MatchString(s):
		return "<sid>"
	case intRE.MatchString(s):
		return "<int>"
	case hex64RE.MatchString(s):
		return "<hex64>"
	case layoutRE.MatchString(s):
		return "<layout>"
	case sizeRE.MatchString(s):
		return "<int> <hex64>"
	case nodeRE.MatchString(s):
		return "<layout> <int> <layout> <version>"
	case metaRE.MatchString(s):
		m := metaRE.FindStringSubmatch(s)
		out := "<sid> <int>"
		if m[3] != "" {
			out += " " + kindOf(m[3][1:], tag)
		}
		return out
	}
	mailbox, client, _ := strings.Cut(tag, "|")
	s = strings.ReplaceAll(strings.ReplaceAll(s, mailbox, "<tag>"), client, "<client>")
	s = uuidRE.ReplaceAllString(s, "<uuid>")
	for _, p := range []string{"s:", "d:", "a:", ""} {
		rest, ok := strings.CutPrefix(s, p)
		if !ok {
			continue
		}
		switch {
		case len(rest) == 16 && !isPrintable(rest):
			return p + "<16 bytes>"
		case len(rest) == 17 && !isPrintable(rest[:16]) && rest[16] == 'm':
			return p + "<16 bytes>m"
		case hex64RE.MatchString(rest):
			return p + "<hex64>"
		}
	}
	if strings.Contains(s, " ") {
		// Words of numbers and tags (a limiter fold's records): each word's
		// kind.
		words := strings.Fields(s)
		for i, w := range words {
			if intRE.MatchString(w) {
				words[i] = "<int>"
			}
		}
		return strings.Join(words, " ")
	}
	return s
}

func isPrintable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}
