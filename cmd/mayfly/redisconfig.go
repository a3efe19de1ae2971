package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/rueidis"
)

// The Redis settings a node checks on every Redis node it knows
// (deploy/README.md, "Redis settings"). deploy/lib.sh (redis_memory_args)
// gives every Redis our scripts start the same values.
//
// Two of them decide whether mail a node acknowledged stays, and a node
// refuses to start on a Redis that has them wrong:
//
//   - maxmemory-policy noeviction: a full Redis refuses writes (SMTP 451,
//     API 503) instead of evicting keys. Every Mayfly key has a TTL, so a
//     volatile-* policy (a common managed Redis's default) evicts live
//     mailboxes and messages that got a 250 as surely as an allkeys-* one.
//     MAYFLY_REDIS_ALLOW_EVICTION=true makes it a warning, for a Redis
//     whose parameter group cannot be changed yet.
//   - Redis 7.0 or later: every write script ends with SPUBLISH (sharded
//     pub/sub, new in 7.0); an older Redis fails the script after its
//     writes, so a delivery is stored and answered 451. No override.
//
// The others cost memory or safety margin, not correctness, and only warn:
//
//   - maxmemory above 0: with no limit, a full Redis grows until the kernel
//     kills it (or it swaps), and noeviction never gets to refuse a write.
//   - hash-max-listpack-value 4096, hash-max-listpack-entries 48: a
//     mailbox's box hash, which holds its messages too (3 fields each),
//     stays a listpack up to 12 messages of up to ~4 KiB, a few hundred
//     bytes smaller than a hash table; past 48 fields a hash converts, so
//     no listpack grows past ~192 KiB and a full mailbox's writes never
//     move large listpacks.
//   - stream-node-max-bytes 256: Redis 7 allocates a new stream node at
//     min(4096, this) bytes, so a mailbox with one message no longer pays
//     4 KiB for its stream.
//
// maxmemory, maxmemory-policy and the version come from INFO, which a
// managed Redis that renames or forbids CONFIG still answers; the listpack
// and stream settings need CONFIG GET.
var redisSettings = []redisSetting{
	{name: "redis_version", want: ">= 7.0", refuse: true, ok: redisVersionOK},
	{name: "maxmemory-policy", want: "noeviction", refuse: true, override: "MAYFLY_REDIS_ALLOW_EVICTION",
		ok: func(v string) bool { return v == "noeviction" }},
	{name: "maxmemory", want: "> 0", ok: func(v string) bool { return v != "0" }},
	{name: "hash-max-listpack-value", want: "4096", config: true},
	{name: "hash-max-listpack-entries", want: "48", config: true},
	{name: "stream-node-max-bytes", want: "256", config: true},
}

// redisSetting is one checked setting.
type redisSetting struct {
	name, want string
	config     bool              // read with CONFIG GET, else from INFO
	ok         func(string) bool // nil: equal to want
	refuse     bool              // a node does not start with it wrong
	override   string            // the setting that makes the refusal a warning
}

func (s redisSetting) holds(have string) bool {
	if s.ok != nil {
		return s.ok(have)
	}
	return have == s.want
}

// redisVersionOK reports whether version (INFO's redis_version) is 7.0 or
// later.
func redisVersionOK(version string) bool {
	major, rest, _ := strings.Cut(version, ".")
	minor, _, _ := strings.Cut(rest, ".")
	ma, err1 := strconv.Atoi(major)
	_, err2 := strconv.Atoi(minor)
	return err1 == nil && err2 == nil && ma >= 7
}

// redisFinding is one setting of one Redis node as last read.
type redisFinding struct {
	node    string
	setting redisSetting
	have    string
	err     error // could not be read
}

// ok reports whether the setting was read and holds.
func (f redisFinding) ok() bool { return f.err == nil && f.setting.holds(f.have) }

// redisChecker reads redisSettings from every Redis node the client knows:
// at start (where a refusal stops the node), every interval and whenever the
// set of nodes changes (a failover, a node added); it exports each as
// mayfly_redis_setting_ok{node,setting}. A check while running cannot stop
// a serving node: it logs a setting that went wrong at error level (once,
// until it changes again) and the gauge says 0. A setting that cannot be
// read (a node down, CONFIG forbidden) is logged and keeps its last reading
// in the gauge (none yet: no series), so a Redis node that is down does not
// read as one that evicts.
type redisChecker struct {
	client        rueidis.Client
	allowEviction bool
	log           *slog.Logger
	interval      time.Duration // between checks; a minute
	nodesEvery    time.Duration // between looks at the node set; 5 s

	mu    sync.Mutex
	last  map[[2]string]redisFinding // node, setting → the latest finding, for what changed
	gauge map[[2]string]bool         // node, setting → whether its last reading held
	desc  *prometheus.Desc
}

func newRedisChecker(client rueidis.Client, allowEviction bool, log *slog.Logger) *redisChecker {
	return &redisChecker{
		client: client, allowEviction: allowEviction, log: log,
		interval: time.Minute, nodesEvery: 5 * time.Second,
		desc: prometheus.NewDesc("mayfly_redis_setting_ok",
			"1 when the Redis node's setting is what Mayfly needs (deploy/README.md, Redis settings), 0 when it differs; a setting that cannot be read keeps its last reading. Checked at start, every minute and when the nodes change. maxmemory-policy and redis_version at 0 lose acknowledged mail.",
			[]string{"node", "setting"}, nil),
	}
}

func (c *redisChecker) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *redisChecker) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, ok := range c.gauge {
		v := 0.0
		if ok {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, v, k[0], k[1])
	}
}

// start checks every node once and returns the refusal, if any: an error
// naming the node, the setting, its value and the fix.
func (c *redisChecker) start(ctx context.Context) error {
	var refusals []error
	for _, f := range c.check(ctx) {
		if f.err == nil && !f.ok() && f.setting.refuse && !c.overridden(f.setting) {
			refusals = append(refusals, refusal(f))
		}
	}
	return errors.Join(refusals...)
}

func (c *redisChecker) overridden(s redisSetting) bool {
	return s.override == "MAYFLY_REDIS_ALLOW_EVICTION" && c.allowEviction
}

// refusal is the error a node stops with.
func refusal(f redisFinding) error {
	switch f.setting.name {
	case "maxmemory-policy":
		return fmt.Errorf("redis %s has maxmemory-policy %s: a full Redis would evict live mailboxes and messages that got a 250 "+
			"(every Mayfly key has a TTL, so volatile-* policies evict them too). Set maxmemory-policy noeviction "+
			"(redis.conf, CONFIG SET, or the managed Redis's parameter group); MAYFLY_REDIS_ALLOW_EVICTION=true starts anyway with a warning",
			f.node, f.have)
	case "redis_version":
		return fmt.Errorf("redis %s is version %s: Mayfly needs Redis 7.0 or later (its scripts publish with SPUBLISH, sharded pub/sub); upgrade Redis",
			f.node, f.have)
	}
	return fmt.Errorf("redis %s: %s is %s, want %s", f.node, f.setting.name, f.have, f.setting.want)
}

// check reads every setting of every node the client knows, logs what
// changed since the last check (everything, the first time) and keeps it
// for the gauge. Nodes no longer known leave the gauge.
func (c *redisChecker) check(ctx context.Context) []redisFinding {
	nodes := c.client.Nodes()
	var found []redisFinding
	for _, addr := range slices.Sorted(maps.Keys(nodes)) {
		found = append(found, c.readNode(ctx, addr, nodes[addr])...)
	}
	if ctx.Err() != nil {
		return found // stopping: what failed is the stop's doing
	}
	c.mu.Lock()
	prev, prevGauge := c.last, c.gauge
	c.last = make(map[[2]string]redisFinding, len(found))
	c.gauge = make(map[[2]string]bool, len(found))
	for _, f := range found {
		k := [2]string{f.node, f.setting.name}
		c.last[k] = f
		if f.err == nil {
			c.gauge[k] = f.ok()
		} else if ok, read := prevGauge[k]; read {
			c.gauge[k] = ok
		}
		p, seen := prev[k]
		if seen && p.ok() == f.ok() && p.have == f.have && (p.err == nil) == (f.err == nil) || !seen && f.ok() {
			continue // unchanged, or a node's first reading that holds
		}
		c.report(f, prev != nil)
	}
	c.mu.Unlock()
	return found
}

// report logs one finding that is new or changed; running says the node
// already serves (at start, a refusal is also start's error).
func (c *redisChecker) report(f redisFinding, running bool) {
	attrs := []any{"node", f.node, "setting", f.setting.name, "have", f.have, "want", f.setting.want}
	switch {
	case f.err != nil:
		c.log.Warn("cannot read a redis setting; check it by hand (deploy/README.md, Redis settings)",
			"node", f.node, "setting", f.setting.name, "want", f.setting.want, "err", f.err)
	case f.ok():
		if running {
			c.log.Info("redis setting as mayfly needs it", attrs...)
		}
	case f.setting.refuse && c.overridden(f.setting):
		c.log.Warn("redis setting loses acknowledged mail; allowed by "+f.setting.override+" (deploy/README.md, Redis settings)", attrs...)
	case f.setting.refuse && running:
		c.log.Error("redis setting loses acknowledged mail: "+refusal(f).Error(), attrs...)
	case f.setting.refuse:
		c.log.Error("redis setting refused; the node stops (deploy/README.md, Redis settings)", attrs...)
	case f.setting.name == "maxmemory":
		c.log.Warn("redis has no memory limit (maxmemory 0): a full Redis grows until the kernel kills it instead of refusing writes; set maxmemory below the machine's memory (deploy/README.md, Redis settings)", attrs...)
	default:
		c.log.Warn("redis setting differs from what mayfly is sized for (deploy/README.md, Redis settings)", attrs...)
	}
}

// readNode reads the settings of one node: INFO server and INFO memory
// (one section each: Redis before 7 takes one), then CONFIG GET.
func (c *redisChecker) readNode(ctx context.Context, addr string, node rueidis.Client) []redisFinding {
	info := map[string]string{}
	var infoErr error
	for _, section := range []string{"server", "memory"} {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		text, err := node.Do(cctx, node.B().Info().Section(section).Build()).ToString()
		cancel()
		if err != nil {
			infoErr = err
			break
		}
		for _, line := range strings.Split(text, "\n") {
			if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
				info[k] = v
			}
		}
	}
	var out []redisFinding
	var configErr error
	for _, s := range redisSettings {
		f := redisFinding{node: addr, setting: s}
		switch {
		case !s.config && infoErr != nil:
			f.err = infoErr
		case !s.config:
			// INFO spells the parameters with underscores.
			f.have = info[strings.ReplaceAll(s.name, "-", "_")]
		case configErr != nil:
			f.err = configErr
		default:
			cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			have, err := node.Do(cctx, node.B().ConfigGet().Parameter(s.name).Build()).AsStrMap()
			cancel()
			f.have, f.err = have[s.name], err
			configErr = err // a managed Redis may rename CONFIG: one try a node
		}
		out = append(out, f)
	}
	return out
}

// run checks again every interval and when the client's set of nodes
// changes, until ctx ends.
func (c *redisChecker) run(ctx context.Context) {
	known := slices.Sorted(maps.Keys(c.client.Nodes()))
	lastCheck := time.Now()
	tick := time.NewTicker(c.nodesEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		nodes := slices.Sorted(maps.Keys(c.client.Nodes()))
		if slices.Equal(nodes, known) && time.Since(lastCheck) < c.interval {
			continue
		}
		known, lastCheck = nodes, time.Now()
		c.check(ctx)
	}
}
