package main

import (
	"context"
	"log/slog"
	"slices"
	"time"

	"github.com/redis/rueidis"
)

// redisSettings are the Redis parameters Mayfly's memory figures rely on
// (deploy/README.md, "Redis settings"). deploy/lib.sh (redis_memory_args)
// gives every Redis our scripts start the same values; a node checks the
// Redis it finds at start and warns about each one that differs, the way it
// refuses a bad MAYFLY_* setting, but without refusing: a different value
// costs memory, not correctness.
//
//   - hash-max-listpack-value 4096, hash-max-listpack-entries 48: a mailbox's
//     box hash, which holds its messages too (3 fields each), stays a
//     listpack up to 12 messages of up to ~4 KiB, a few hundred bytes
//     smaller than a hash table; past 48 fields a hash converts, so no
//     listpack grows past ~192 KiB and a full mailbox's writes never move
//     large listpacks.
//   - stream-node-max-bytes 256: Redis 7 allocates a new stream node at
//     min(4096, this) bytes, so a mailbox with one message no longer pays
//     4 KiB for its stream.
//   - maxmemory-policy noeviction: a full Redis refuses writes instead of
//     evicting the keys of live mailboxes.
var redisSettings = []struct{ name, want string }{
	{"hash-max-listpack-value", "4096"},
	{"hash-max-listpack-entries", "48"},
	{"stream-node-max-bytes", "256"},
	{"maxmemory-policy", "noeviction"},
}

// checkRedisSettings reads redisSettings from every node the client knows
// and logs a warning for each value that differs, and one when a node does
// not answer CONFIG GET (a managed Redis may rename it). It returns the
// number of warnings.
func checkRedisSettings(ctx context.Context, client rueidis.Client, log *slog.Logger) int {
	nodes := client.Nodes()
	addrs := make([]string, 0, len(nodes))
	for addr := range nodes {
		addrs = append(addrs, addr)
	}
	slices.Sort(addrs)
	warnings := 0
	for _, addr := range addrs {
		node := nodes[addr]
		for _, s := range redisSettings {
			c, cancel := context.WithTimeout(ctx, 2*time.Second)
			have, err := node.Do(c, node.B().ConfigGet().Parameter(s.name).Build()).AsStrMap()
			cancel()
			if err != nil {
				log.Warn("cannot read a redis setting; check it by hand (deploy/README.md, Redis settings)",
					"node", addr, "setting", s.name, "want", s.want, "err", err)
				warnings++
				break
			}
			if have[s.name] != s.want {
				log.Warn("redis setting differs from what mayfly is sized for (deploy/README.md, Redis settings)",
					"node", addr, "setting", s.name, "have", have[s.name], "want", s.want)
				warnings++
			}
		}
	}
	return warnings
}
