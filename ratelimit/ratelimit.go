// Package ratelimit enforces Mayfly's per-client and service-wide limits
// (spec §8) in Redis, so every edge and ingest node shares one count.
//
// Each decision is one round trip to one Cluster slot. The creation limits
// and the global cap are Lua scripts on fixed windows aligned to the Redis
// server clock (TIME inside the script), so nodes with skewed clocks never
// disagree about which window a creation falls in. The request rate and the
// generic rules (SMTP) are on the hot paths and use a counter per window
// (INCR and PEXPIRE NX): their windows are aligned to the clock of the node
// that counts, and the key names the window, so every node still counts one
// shared number per window. See AllowRequest for what a clock skew between
// nodes can do. Windows of up to a minute (ShortWindow) are counted on the
// primary only, unreplicated (scripts/count.lua): the creation windows, the
// active slots and the global cap are replicated.
//
// ratelimit deliberately knows nothing about HTTP, SMTP or mailboxes beyond
// an opaque mailbox tag: callers turn a Decision into a status code, and count
// decisions for metrics themselves.
package ratelimit

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
)

var (
	// ErrUnavailable wraps every failure to reach Redis or run a script,
	// including a cancelled or expired context. Callers answer 503; the
	// wrapped error is for logs only.
	ErrUnavailable = errors.New("ratelimit: redis unavailable")
	// ErrInvalid reports a programming error in the caller's arguments (a
	// rule without a name, limit or window; a reservation without a mailbox
	// or lifetime). Nothing is counted.
	ErrInvalid = errors.New("ratelimit: invalid argument")
)

// Config holds the limits. Zero (or negative) values mean the spec's
// defaults; see withDefaults.
type Config struct {
	KeyPrefix             string // default "mf"
	RequestsPerSecond     int    // default 8, per client, fixed one-second window
	CreatePerMinute       int    // default 5
	CreatePerHour         int    // default 10
	CreatePerDay          int    // default 20
	ActivePerClient       int    // default 5
	GlobalCreatePerMinute int    // default 5000, shared by the whole service
	// A network's share (IPv4 /24, IPv6 /48: NetworkPrefix) of the
	// creations its clients may make, counted while SetNetworkShares is on:
	// windows of the creations its clients' own limits admitted, and its
	// live mailboxes.
	NetCreatePerMinute int // default 60
	NetCreatePerHour   int // default 600
	NetCreatePerDay    int // default 2000
	NetActive          int // default 300
}

// withDefaults is the one place that turns unset fields into spec §8's values.
func (c Config) withDefaults() Config {
	if c.KeyPrefix == "" {
		c.KeyPrefix = "mf"
	}
	orDefault := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	orDefault(&c.RequestsPerSecond, 8)
	orDefault(&c.CreatePerMinute, 5)
	orDefault(&c.CreatePerHour, 10)
	orDefault(&c.CreatePerDay, 20)
	orDefault(&c.ActivePerClient, 5)
	orDefault(&c.GlobalCreatePerMinute, 5000)
	orDefault(&c.NetCreatePerMinute, 60)
	orDefault(&c.NetCreatePerHour, 600)
	orDefault(&c.NetCreatePerDay, 2000)
	orDefault(&c.NetActive, 300)
	// A network's share is never below one client's own allowance (the dev
	// profile's raised per-IP limits raise it too).
	c.NetCreatePerMinute = max(c.NetCreatePerMinute, c.CreatePerMinute)
	c.NetCreatePerHour = max(c.NetCreatePerHour, c.CreatePerHour)
	c.NetCreatePerDay = max(c.NetCreatePerDay, c.CreatePerDay)
	c.NetActive = max(c.NetActive, c.ActivePerClient)
	return c
}

// Kind names the limit behind a refusal. A generic Rule's kind is its Name.
type Kind string

// The limits of spec §8.
const (
	KindRequest  Kind = "request"
	KindCreation Kind = "creation"
	KindActive   Kind = "active"
	KindGlobal   Kind = "global"
	// A network's share (Config.NetCreatePerMinute…, NetActive).
	KindNetCreation Kind = "net_creation"
	KindNetActive   Kind = "net_active"
)

// Decision is the outcome of one counted hit.
type Decision struct {
	Allowed bool
	// Kind is the limit that refused the hit; empty when allowed (and for an
	// invalid creation attempt, which is refused by the caller, not a limit).
	Kind Kind
	// RetryAfter is when the refusing window resets, in whole seconds; 0 when
	// allowed or when no wait helps (the active cap frees only on delete or
	// expiry).
	RetryAfter time.Duration
	// Window names the creation window that refused (KindCreation and
	// KindNetCreation): "minute", "hour" or "day", the one that resets last
	// when several are full; empty otherwise.
	Window string
}

//go:embed scripts/*.lua
var scripts embed.FS

// script loads an embedded script, after the files of prelude (their
// local functions); a missing file is a build defect.
func script(name string, prelude ...string) *rueidis.Lua {
	var src []byte
	for _, f := range append(prelude, name) {
		b, err := scripts.ReadFile("scripts/" + f)
		if err != nil {
			panic(err)
		}
		src = append(append(src, b...), '\n')
	}
	return rueidis.NewLuaScript(string(src))
}

// Limiter counts hits in Redis. It is safe for concurrent use.
type Limiter struct {
	client rueidis.Client
	cfg    Config
	keys   keys

	short, take, give, window, reserve, release, extend *rueidis.Lua
	reserveFold, releaseFold, extendFold                *rueidis.Lua

	// Script arguments fixed by the config, built once so the per-request
	// path allocates only its key.
	globalArgs, limitArgs, netArgs []string

	// now is the node clock of the native windows; tests skew it.
	now func() time.Time

	// zsetSlots: new active slots go to the client's ZSET, as the
	// release of 2026-11-24 keeps them (SetZSetSlots).
	zsetSlots atomic.Bool
	// netShares: creations are counted against the client's network too
	// (SetNetworkShares).
	netShares atomic.Bool
	// foldFrom: the node-clock ms from which the networks' folds decide
	// (SetFold); before it they mirror. 0: no fold is written.
	foldFrom atomic.Int64
}

// New returns a Limiter on client, which the caller owns and closes.
func New(client rueidis.Client, cfg Config) *Limiter {
	cfg = cfg.withDefaults()
	itoa := strconv.Itoa
	return &Limiter{
		client:      client,
		cfg:         cfg,
		keys:        newKeys(cfg.KeyPrefix),
		short:       script("count.lua"),
		take:        script("take.lua"),
		give:        script("give.lua"),
		window:      script("window.lua"),
		reserve:     script("reserve.lua", "slots.lua"),
		release:     script("release.lua", "slots.lua"),
		extend:      script("extend.lua", "slots.lua"),
		reserveFold: script("reserve_fold.lua", "fold.lua"),
		releaseFold: script("release_fold.lua", "fold.lua"),
		extendFold:  script("extend_fold.lua", "fold.lua"),
		now:         time.Now,
		globalArgs:  []string{itoa(cfg.GlobalCreatePerMinute), "60000"},
		limitArgs: []string{
			itoa(cfg.CreatePerMinute), itoa(cfg.CreatePerHour),
			itoa(cfg.CreatePerDay), itoa(cfg.ActivePerClient),
		},
		netArgs: []string{
			itoa(cfg.NetCreatePerMinute), itoa(cfg.NetCreatePerHour),
			itoa(cfg.NetCreatePerDay), itoa(cfg.NetActive),
		},
	}
}

// Config returns the effective configuration, defaults applied.
func (l *Limiter) Config() Config { return l.cfg }

// AllowRequest counts one request by client in the current one-second window
// and admits the first RequestsPerSecond of each window. Over the limit it
// returns Kind=request and RetryAfter=1s (spec: "Retry-After: 1"). Errors
// wrap ErrUnavailable.
//
// The window is the whole second of this node's clock: the counter's key
// names it, so every node that counts in that second shares one count, and
// no window ever admits more than the limit. A node whose clock is δ ahead
// of another's starts and ends each window δ earlier; a client that spreads
// its requests over both can pass up to the limit again within δ of a
// window's edge. Keep the nodes' clocks synchronised (NTP keeps them within
// a few ms); TestAllowRequestSkewedNodes shows the bound.
func (l *Limiter) AllowRequest(ctx context.Context, client string) (Decision, error) {
	d, err := l.count(ctx, client, Rule{Name: string(KindRequest), Limit: l.cfg.RequestsPerSecond, Window: time.Second})
	if err != nil || d.Allowed {
		return Decision{Allowed: err == nil}, err
	}
	return Decision{Kind: KindRequest, RetryAfter: time.Second}, nil
}

// Rule is a generic fixed-window limit, such as SMTP connections per IP.
// Name tells rules apart in the key, so two rules must not share a name.
type Rule struct {
	Name   string
	Limit  int
	Window time.Duration // whole milliseconds; windows align to the node clock
}

func (r Rule) valid() error {
	if r.Name == "" || r.Name == string(KindRequest) || r.Limit <= 0 || r.Window.Milliseconds() <= 0 {
		return fmt.Errorf("rule %q (limit %d, window %v): %w", r.Name, r.Limit, r.Window, ErrInvalid)
	}
	return nil
}

// Allow counts one hit by client against r, in a window aligned to this
// node's clock as AllowRequest's are. Over the limit it returns
// Kind=Kind(r.Name) and RetryAfter = time until the window ends, rounded up
// to whole seconds. Errors wrap ErrInvalid (bad rule, nothing counted) or
// ErrUnavailable.
func (l *Limiter) Allow(ctx context.Context, r Rule, client string) (Decision, error) {
	ds, err := l.AllowAll(ctx, client, r)
	if err != nil {
		return Decision{}, err
	}
	return ds[0], nil
}

// AllowAll counts one hit by client against each rule, all in one round trip
// (a client's counters share a slot), and returns a decision per rule. Every
// rule is counted whatever the others decide. Errors wrap ErrInvalid or
// ErrUnavailable.
func (l *Limiter) AllowAll(ctx context.Context, client string, rules ...Rule) ([]Decision, error) {
	for _, r := range rules {
		if err := r.valid(); err != nil {
			return nil, err
		}
	}
	return l.countAll(ctx, client, rules)
}

// count is countAll for one rule, without the rule check.
func (l *Limiter) count(ctx context.Context, client string, r Rule) (Decision, error) {
	ds, err := l.countAll(ctx, client, []Rule{r})
	if err != nil {
		return Decision{}, err
	}
	return ds[0], nil
}

// ShortWindow is the longest window whose counter is not replicated
// (count.lua): losing it in a failover gives a client at most one more
// window's allowance, once. Longer windows are counted with replicated
// INCR and PEXPIRE.
const ShortWindow = time.Minute

// countAll counts one hit on each rule's counter of the current window, in
// one round trip. A refused hit is counted too: it changes no decision, since
// a window's count only grows. The key outlives its window by one window, so
// a node whose clock lags still finds the count. PEXPIRE is NX: only the hit
// that finds the key without an expiry sets one.
//
// When every rule's window is at most ShortWindow (the request rate and the
// SMTP rules at their defaults), count.lua counts them all without
// replicating anything. Otherwise INCR and PEXPIRE NX go in one pipeline,
// replicated (a pipeline cut between INCR and PEXPIRE leaves a key without
// an expiry, and the next hit sets it).
func (l *Limiter) countAll(ctx context.Context, client string, rules []Rule) ([]Decision, error) {
	now := l.now().UnixMilli()
	ends := make([]int64, len(rules))
	var kbuf, abuf [2]string
	keys, ttls := kbuf[:0], abuf[:0]
	allShort := true
	for i, r := range rules {
		win := r.Window.Milliseconds()
		w := now / win
		ends[i] = (w + 1) * win
		keys = append(keys, l.keys.window(r.Name, client, w))
		ttls = append(ttls, strconv.FormatInt(2*win, 10))
		allShort = allShort && r.Window <= ShortWindow
	}
	counts := make([]int64, len(rules))
	if allShort {
		res, err := l.short.Exec(ctx, l.client, keys, ttls).AsIntSlice()
		if err == nil && len(res) != len(rules) {
			err = fmt.Errorf("count.lua: %d counts for %d rules", len(res), len(rules))
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrUnavailable, rules[0].Name, err)
		}
		copy(counts, res)
	} else {
		b := l.client.B()
		var buf [4]rueidis.Completed
		cmds := buf[:0]
		for i, r := range rules {
			cmds = append(cmds,
				b.Incr().Key(keys[i]).Build(),
				b.Pexpire().Key(keys[i]).Milliseconds(2*r.Window.Milliseconds()).Nx().Build())
		}
		res := l.client.DoMulti(ctx, cmds...)
		for i, r := range rules {
			n, err := res[2*i].AsInt64()
			if err == nil {
				err = res[2*i+1].Error()
			}
			if err != nil {
				return nil, fmt.Errorf("%w: %s: %w", ErrUnavailable, r.Name, err)
			}
			counts[i] = n
		}
	}
	out := make([]Decision, len(rules))
	for i, r := range rules {
		n := counts[i]
		if n <= int64(r.Limit) {
			out[i] = Decision{Allowed: true}
		} else {
			out[i] = Decision{Kind: Kind(r.Name), RetryAfter: ceilSeconds(max(ends[i]-now, 1))}
		}
	}
	return out, nil
}

// Lease is a share of a rule's current window taken at once by Take: hits
// a caller may admit without asking again, until the window ends.
type Lease struct {
	// Granted is how many hits are admitted, 0 to the number asked for;
	// when 0, Decision is the refusal.
	Granted  int
	Decision Decision
	// Window is the window's number (for Give), End its end on this node's
	// clock: an unused hit is void from then on, since it was counted in
	// this window and not the next.
	Window int64
	End    time.Time
}

// Take counts up to want hits by client against r at once, as many as the
// window has room for (take.lua; a refused lease counts nothing): a
// connection that sends many transactions asks Redis once per lease instead
// of once per transaction. The window never admits more than r.Limit: the
// count holds every hit granted and not handed back (Give), and a lease is
// granted only room below the limit. What it may do is refuse early: while
// a lease's hits are unused, another connection of the same client finds
// them counted, until Give hands them back. A rule whose window is longer than ShortWindow is
// leased one hit at a time. Errors wrap ErrInvalid or ErrUnavailable.
func (l *Limiter) Take(ctx context.Context, r Rule, client string, want int) (Lease, error) {
	if err := r.valid(); err != nil {
		return Lease{}, err
	}
	if want < 1 || r.Window > ShortWindow {
		want = 1
	}
	now := l.now().UnixMilli()
	win := r.Window.Milliseconds()
	w := now / win
	lease := Lease{Window: w, End: time.UnixMilli((w + 1) * win)}
	if r.Window > ShortWindow {
		d, err := l.count(ctx, client, r)
		if err != nil {
			return Lease{}, err
		}
		if d.Allowed {
			lease.Granted = 1
		}
		lease.Decision = d
		return lease, nil
	}
	n, err := l.take.Exec(ctx, l.client, []string{l.keys.window(r.Name, client, w)},
		[]string{strconv.FormatInt(2*win, 10), strconv.Itoa(want), strconv.Itoa(r.Limit)}).AsInt64()
	if err != nil {
		return Lease{}, fmt.Errorf("%w: %s: %w", ErrUnavailable, r.Name, err)
	}
	lease.Granted = int(n)
	if lease.Granted > 0 {
		lease.Decision = Decision{Allowed: true}
	} else {
		lease.Decision = Decision{Kind: Kind(r.Name), RetryAfter: ceilSeconds(max((w+1)*win-now, 1))}
	}
	return lease, nil
}

// Give hands back n unused hits of a lease of window w (Lease.Window) on
// r, so that the client's other connections may use them; a window already
// over is left alone. Errors wrap ErrInvalid or ErrUnavailable.
func (l *Limiter) Give(ctx context.Context, r Rule, client string, w int64, n int) error {
	if err := r.valid(); err != nil {
		return err
	}
	if n < 1 || r.Window > ShortWindow {
		return nil
	}
	err := l.give.Exec(ctx, l.client, []string{l.keys.window(r.Name, client, w)}, []string{strconv.Itoa(n)}).Error()
	if err != nil {
		return fmt.Errorf("%w: give %s: %w", ErrUnavailable, r.Name, err)
	}
	return nil
}

// AllowGlobalCreation counts one creation against the service-wide minute
// window (Redis clock). It admits exactly GlobalCreatePerMinute per window,
// also under concurrency; refused calls are not counted. Only creations the
// per-client limits admitted should reach it. Over the cap it returns
// Kind=global and RetryAfter = time until the minute resets. Errors wrap
// ErrUnavailable.
func (l *Limiter) AllowGlobalCreation(ctx context.Context) (Decision, error) {
	keys := [1]string{l.keys.globalCreation()}
	ms, err := l.window.Exec(ctx, l.client, keys[:], l.globalArgs).AsInt64()
	if err != nil {
		return Decision{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	if ms == 0 {
		return Decision{Allowed: true}, nil
	}
	return Decision{Kind: KindGlobal, RetryAfter: ceilSeconds(ms)}, nil
}

// ReserveCreation counts one mailbox-creation attempt by client and, when
// admitted, reserves an active slot for mailbox until now+lifetime (server
// clock), in one script; with network shares on (SetNetworkShares), an
// attempt the client's limits admit is then counted and reserved the same
// way against the client's network (NetworkOf), in a second script. While
// the folds decide (SetFold), both are one script on the network's fold;
// while they mirror, a third script counts the outcome there.
//
// Every attempt counts in the minute, hour and day windows, also invalid and
// refused ones (spec: "failed attempts count"). In order:
//   - valid=false (bad request body): counted, Allowed=false, Kind "".
//   - a window is full: Kind=creation, RetryAfter = time until the latest of
//     the full windows resets, rounded up to whole seconds.
//   - the client holds ActivePerClient unexpired slots: Kind=active,
//     RetryAfter 0.
//   - the network's window is full (Kind=net_creation, RetryAfter as for
//     creation) or it holds NetActive slots (Kind=net_active): the client's
//     slot is released again.
//   - otherwise Allowed=true. If creation then fails, call Release.
//
// Errors wrap ErrInvalid (valid with an empty mailbox or lifetime < 1ms;
// nothing counted) or ErrUnavailable.
func (l *Limiter) ReserveCreation(ctx context.Context, client, mailbox string, lifetime time.Duration, valid bool) (Decision, error) {
	life := (lifetime + time.Millisecond - 1).Milliseconds()
	if valid && (mailbox == "" || life <= 0) {
		return Decision{}, fmt.Errorf("reserve mailbox %q for %v: %w", mailbox, lifetime, ErrInvalid)
	}
	switch l.fold() {
	case foldDecides:
		return l.reserveInFold(ctx, client, mailbox, life, valid)
	case foldMirrors:
		d, admitted, err := l.reserveInKeys(ctx, client, mailbox, life, valid)
		if err != nil {
			return d, err
		}
		// The fold counts what the keys decided, so that it holds a whole
		// day of them when it starts deciding (SetFold).
		args := append(l.foldArgs(client, mailbox, life, valid), "m", flag(admitted), flag(d.Allowed))
		if err := l.reserveFold.Exec(ctx, l.client, []string{l.keys.fold(client)}, args).Error(); err != nil {
			if d.Allowed {
				_ = l.both(ctx, l.release, client, []string{mailbox}) // not created: free it again
			}
			return Decision{}, fmt.Errorf("%w: reserve (fold): %w", ErrUnavailable, err)
		}
		return d, nil
	}
	d, _, err := l.reserveInKeys(ctx, client, mailbox, life, valid)
	return d, err
}

// reserveInKeys is ReserveCreation in the keys of the layouts before
// 2026-11-28: the client's hash, then its network's. admitted: the
// client's own limits admitted the attempt (it was then counted against
// the network).
func (l *Limiter) reserveInKeys(ctx context.Context, client, mailbox string, life int64, valid bool) (d Decision, admitted bool, err error) {
	layout := ""
	if l.zsetSlots.Load() {
		layout = "1"
	}
	d, err = l.reserveIn(ctx, l.keys.creation(client), l.keys.active(client), l.limitArgs, mailbox, life, valid, layout)
	if err != nil || !d.Allowed || !l.netShares.Load() {
		return d, d.Allowed, err
	}
	net := NetworkOf(client)
	if net == "" {
		return d, true, nil
	}
	nd, err := l.reserveIn(ctx, l.keys.network(net), l.keys.networkZSet(net), l.netArgs, mailbox, life, true, "")
	if err == nil && nd.Allowed {
		return d, true, nil
	}
	if rerr := l.releaseIn(ctx, l.keys.creation(client), l.keys.active(client), mailbox); rerr != nil && err == nil {
		err = rerr
	}
	if err != nil {
		return Decision{}, false, err
	}
	return networks(nd), true, nil
}

// networks names a refusal by a network's share: its window
// (net_creation) or its live inboxes (net_active).
func networks(d Decision) Decision {
	switch d.Kind {
	case KindCreation:
		d.Kind = KindNetCreation
	case KindActive:
		d.Kind = KindNetActive
	}
	return d
}

// foldArgs are reserve_fold.lua's arguments up to its mode.
func (l *Limiter) foldArgs(client, mailbox string, life int64, valid bool) []string {
	args := make([]string, 0, 15)
	args = append(args, l.limitArgs...)
	args = append(args, l.netArgs...)
	return append(args, mailbox, strconv.FormatInt(life, 10), flag(valid), client)
}

func flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// reserveInFold is ReserveCreation in the client's network's fold: one
// script for the client's limits and the network's share.
func (l *Limiter) reserveInFold(ctx context.Context, client, mailbox string, life int64, valid bool) (Decision, error) {
	args := append(l.foldArgs(client, mailbox, life, valid), "")
	reply, err := l.reserveFold.Exec(ctx, l.client, []string{l.keys.fold(client)}, args).ToArray()
	if err != nil {
		return Decision{}, fmt.Errorf("%w: reserve: %w", ErrUnavailable, err)
	}
	if len(reply) < 4 {
		return Decision{}, fmt.Errorf("%w: reserve: reply of %d elements", ErrUnavailable, len(reply))
	}
	d, err := decision(reply)
	if err != nil {
		return Decision{}, err
	}
	if party, _ := reply[3].ToString(); party == "n" {
		d = networks(d)
	}
	return d, nil
}

// reserveIn runs reserve.lua on one party's hash and sorted set with its
// limits args (per minute, hour, day, active).
func (l *Limiter) reserveIn(ctx context.Context, hash, zset string, limits []string, mailbox string, life int64, valid bool, layout string) (Decision, error) {
	ok := "0"
	if valid {
		ok = "1"
	}
	args := append(limits[:len(limits):len(limits)], mailbox, strconv.FormatInt(life, 10), ok, layout)
	reply, err := l.reserve.Exec(ctx, l.client, []string{hash, zset}, args).ToArray()
	if err != nil {
		return Decision{}, fmt.Errorf("%w: reserve: %w", ErrUnavailable, err)
	}
	return decision(reply)
}

// decision reads a reserve script's reply {code, retry ms, window…}.
func decision(reply []rueidis.RedisMessage) (Decision, error) {
	if len(reply) < 2 {
		return Decision{}, fmt.Errorf("%w: reserve: reply of %d elements", ErrUnavailable, len(reply))
	}
	code, err := reply[0].AsInt64()
	if err != nil {
		return Decision{}, fmt.Errorf("%w: reserve: %w", ErrUnavailable, err)
	}
	ms, err := reply[1].AsInt64()
	if err != nil {
		return Decision{}, fmt.Errorf("%w: reserve: %w", ErrUnavailable, err)
	}
	switch code {
	case 0:
		return Decision{Allowed: true}, nil
	case 1:
		return Decision{}, nil
	case 2:
		d := Decision{Kind: KindCreation, RetryAfter: ceilSeconds(ms)}
		if len(reply) > 2 {
			name, _ := reply[2].ToString()
			d.Window = windowNames[name]
		}
		return d, nil
	case 3:
		return Decision{Kind: KindActive}, nil
	}
	return Decision{}, fmt.Errorf("%w: reserve: unknown reply code %d", ErrUnavailable, code)
}

func (l *Limiter) releaseIn(ctx context.Context, hash, zset, mailbox string) error {
	if err := l.release.Exec(ctx, l.client, []string{hash, zset}, []string{mailbox}).Error(); err != nil {
		return fmt.Errorf("%w: release: %w", ErrUnavailable, err)
	}
	return nil
}

// both runs script on the client's keys and, when it has a network, on the
// network's, in one round trip (two slots: in parallel). Slots are looked
// for in the network's keys whatever SetNetworkShares says, so a slot
// reserved while it was on is released and extended when it is off.
func (l *Limiter) both(ctx context.Context, script *rueidis.Lua, client string, args []string) error {
	net := NetworkOf(client)
	var netErr error
	var wg sync.WaitGroup
	if net != "" {
		wg.Add(1)
		go func() {
			defer wg.Done()
			netErr = script.Exec(ctx, l.client, []string{l.keys.network(net), l.keys.networkZSet(net)}, args).Error()
		}()
	}
	err := script.Exec(ctx, l.client, []string{l.keys.creation(client), l.keys.active(client)}, args).Error()
	wg.Wait()
	return errors.Join(err, netErr)
}

// Release frees mailbox's active slot (mailbox deleted, or creation failed
// after ReserveCreation), its client's and its network's. Releasing a
// mailbox without a slot is a no-op. Errors wrap ErrUnavailable.
func (l *Limiter) Release(ctx context.Context, client, mailbox string) error {
	if err := l.inBoth(ctx, l.release, l.releaseFold, client, []string{mailbox}, []string{mailbox, client}); err != nil {
		return fmt.Errorf("%w: release: %w", ErrUnavailable, err)
	}
	return nil
}

// ExtendActive moves mailbox's slot expiry to expiresAt (mailbox extended),
// its client's and its network's, only while the mailbox still holds a
// slot; otherwise it is a no-op, so an extension never resurrects an
// expired or released slot. Errors wrap ErrUnavailable.
func (l *Limiter) ExtendActive(ctx context.Context, client, mailbox string, expiresAt time.Time) error {
	args := []string{mailbox, strconv.FormatInt(expiresAt.UnixMilli(), 10)}
	if err := l.inBoth(ctx, l.extend, l.extendFold, client, args, args); err != nil {
		return fmt.Errorf("%w: extend: %w", ErrUnavailable, err)
	}
	return nil
}

// inBoth runs a slot change where the layout keeps slots: in the fold
// while it decides; in the older keys (both) otherwise, and also in the
// fold while it mirrors them (in parallel: other slots).
func (l *Limiter) inBoth(ctx context.Context, keyed, folded *rueidis.Lua, client string, args, foldArgs []string) error {
	mode := l.fold()
	if mode == foldDecides {
		return folded.Exec(ctx, l.client, []string{l.keys.fold(client)}, foldArgs).Error()
	}
	var foldErr error
	var wg sync.WaitGroup
	if mode == foldMirrors {
		wg.Add(1)
		go func() {
			defer wg.Done()
			foldErr = folded.Exec(ctx, l.client, []string{l.keys.fold(client)}, foldArgs).Error()
		}()
	}
	err := l.both(ctx, keyed, client, args)
	wg.Wait()
	return errors.Join(err, foldErr)
}

// The fold's part (storage layout 2026-11-28, SetFold).
type foldMode int

const (
	foldOff     foldMode = iota // nothing is written to the folds
	foldMirrors                 // the older keys decide; the folds count the same
	foldDecides                 // the folds decide alone
)

func (l *Limiter) fold() foldMode {
	from := l.foldFrom.Load()
	switch {
	case from == 0:
		return foldOff
	case l.now().UnixMilli() < from:
		return foldMirrors
	}
	return foldDecides
}

// SetFold turns the networks' folds on (storage layout 2026-11-28: a
// network's share of the creations and its clients' creation records in
// one hash, keys.fold) or off. A fold decides from decideFrom on; before,
// the keys of the older layouts decide, as SetNetworkShares and
// SetZSetSlots say, and every attempt, slot, release and extension is
// also counted in the fold. The layout guard sets decideFrom a day and a
// minute after the fleet started writing the folds, when they hold every
// creation window that is still open (a day's); on a fresh cluster, at
// once.
func (l *Limiter) SetFold(on bool, decideFrom time.Time) {
	if !on {
		l.foldFrom.Store(0)
		return
	}
	l.foldFrom.Store(max(decideFrom.UnixMilli(), 1))
}

// SetNetworkShares turns the networks' shares of the creations on (storage
// layout 2026-11-26, which writes the networks' keys) or off.
func (l *Limiter) SetNetworkShares(on bool) { l.netShares.Store(on) }

// NetworkOf is the network (NetworkPrefix, as a string) of a client key made
// by ClientKey: "198.51.100.0/24" for "198.51.100.7", "2001:db8:1::/48" for
// "2001:db8:1:2::/64"; "" for anything else.
func NetworkOf(client string) string {
	if p, err := netip.ParsePrefix(client); err == nil {
		return NetworkPrefix(p.Addr()).String()
	}
	if a, err := netip.ParseAddr(client); err == nil {
		return NetworkPrefix(a).String()
	}
	return ""
}

// SetZSetSlots chooses where new active-inbox slots are written: in the
// client's ZSET, as the release of 2026-11-24 keeps them (storage layout
// 2026-11-24, while a node of that release may still run), or in the
// client's hash (the layout since 2026-11-25). Slots in either key are
// always counted, released and extended.
func (l *Limiter) SetZSetSlots(on bool) { l.zsetSlots.Store(on) }

// ClientKey turns a peer address into the limiter's client key: IPv4 (also
// IPv4-mapped IPv6) as a dotted quad; IPv6 as its /64 prefix, e.g.
// "2001:db8:1:2::/64", because one host usually owns a whole /64 and could
// otherwise dodge every limit by rotating addresses. Zones are dropped.
func ClientKey(ip netip.Addr) string {
	ip = ip.Unmap().WithZone("")
	if !ip.IsValid() || ip.Is4() {
		return ip.String()
	}
	return ClientPrefix(ip).String()
}

// ClientPrefix is the block of addresses ClientKey names: the IPv4 address
// (/32) or the IPv6 /64. Per-client caps that are counted in memory (open
// connections, sessions, buffered bytes) key on it, so every limit of a
// client is one count. An invalid address gives the zero Prefix.
func ClientPrefix(ip netip.Addr) netip.Prefix {
	ip = ip.Unmap().WithZone("")
	if ip.Is4() {
		return netip.PrefixFrom(ip, 32)
	}
	return netip.PrefixFrom(ip, 64).Masked()
}

// NetworkPrefix is the block one party can hold many clients of, which the
// aggregate caps share out: the IPv4 /24 (the smallest block routed on the
// Internet, usually one provider's subnet) and the IPv6 /48 (an end site's
// usual allocation, handed out free by tunnel brokers: 65,536 /64s). An
// invalid address gives the zero Prefix.
func NetworkPrefix(ip netip.Addr) netip.Prefix {
	ip = ip.Unmap().WithZone("")
	if ip.Is4() {
		return netip.PrefixFrom(ip, 24).Masked()
	}
	return netip.PrefixFrom(ip, 48).Masked()
}

// windowNames are reserve.lua's names of the creation windows.
var windowNames = map[string]string{"m": "minute", "h": "hour", "d": "day"}

func ceilSeconds(ms int64) time.Duration {
	return time.Duration((ms+999)/1000) * time.Second
}
