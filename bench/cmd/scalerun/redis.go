package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"
)

// primaries returns a client per primary of the cluster.
func primaries(ctx context.Context, rdb rueidis.Client) ([]rueidis.Client, error) {
	var out []rueidis.Client
	for addr, node := range rdb.Nodes() {
		info, err := node.Do(ctx, node.B().Info().Section("replication").Build()).ToString()
		if err != nil {
			return nil, fmt.Errorf("INFO replication of %s: %w", addr, err)
		}
		if strings.Contains(info, "role:master") {
			out = append(out, node)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no primary found")
	}
	return out, nil
}

// infoFields sums numeric INFO fields over the primaries.
func (r *run) infoFields(section string, names ...string) (map[string]float64, error) {
	sum := make(map[string]float64, len(names))
	for _, node := range r.prim {
		info, err := node.Do(r.ctx, node.B().Info().Section(section).Build()).ToString()
		if err != nil {
			return nil, fmt.Errorf("INFO %s: %w", section, err)
		}
		for _, line := range strings.Split(info, "\r\n") {
			k, v, ok := strings.Cut(line, ":")
			if !ok {
				continue
			}
			for _, n := range names {
				if k == n {
					f, _ := strconv.ParseFloat(v, 64)
					sum[n] += f
				}
			}
		}
	}
	return sum, nil
}

// mem is used_memory and used_memory_rss summed over the primaries.
type mem struct{ used, rss float64 }

// memory waits settle first: the per-second request windows
// (mf:rl:{ip}:w:request:…) live two seconds, and a figure per inbox should
// not count the ones its own creation left.
func (r *run) memory(settle time.Duration) mem {
	time.Sleep(settle)
	f, err := r.infoFields("memory", "used_memory", "used_memory_rss")
	must(err)
	return mem{used: f["used_memory"], rss: f["used_memory_rss"]}
}

// cpu is the primaries' used_cpu_user + used_cpu_sys, in seconds.
func (r *run) cpu() float64 {
	f, err := r.infoFields("cpu", "used_cpu_user", "used_cpu_sys")
	must(err)
	return f["used_cpu_user"] + f["used_cpu_sys"]
}

func (r *run) dbsize() int64 {
	var n int64
	for _, node := range r.prim {
		v, err := node.Do(r.ctx, node.B().Dbsize().Build()).AsInt64()
		must(err)
		n += v
	}
	return n
}

// configSet sets a Redis parameter on every primary.
func (r *run) configSet(name, value string) {
	for _, node := range r.prim {
		must(node.Do(r.ctx, node.B().ConfigSet().ParameterValue().ParameterValue(name, value).Build()).Error())
	}
}

func (r *run) configGet(name string) string {
	m, err := r.prim[0].Do(r.ctx, r.prim[0].B().ConfigGet().Parameter(name).Build()).AsStrMap()
	must(err)
	return m[name]
}

// flushAll empties the cluster but for the layout guard, which it puts
// back as it was: without it the nodes' next registration would find a
// cluster holding Mayfly's keys and no guard, and start the fleet at the
// oldest layout (storage.LayoutGuard), so a step would measure a layout
// the nodes were not started with.
func (r *run) flushAll() {
	guard := r.prefix + ":layout-guard"
	dump, err := r.rdb.Do(r.ctx, r.rdb.B().Dump().Key(guard).Build()).ToString()
	if err != nil && !rueidis.IsRedisNil(err) {
		must(err)
	}
	ttl, err := r.rdb.Do(r.ctx, r.rdb.B().Pttl().Key(guard).Build()).AsInt64()
	must(err)
	for _, node := range r.prim {
		must(node.Do(r.ctx, node.B().Flushall().Sync().Build()).Error())
	}
	if dump != "" {
		must(r.rdb.Do(r.ctx, r.rdb.B().Restore().Key(guard).Ttl(max(ttl, 0)).SerializedValue(dump).Replace().Build()).Error())
	}
}

// scanCheck walks every key of every primary and counts mailbox keys
// (prefix:{tag}:…, not the limiter's prefix:rl:…) and keys without a TTL.
func (r *run) scanCheck() (keys, mailbox, noTTL int64) {
	for _, node := range r.prim {
		cursor := uint64(0)
		for {
			e, err := node.Do(r.ctx, node.B().Scan().Cursor(cursor).Count(1000).Build()).AsScanEntry()
			must(err)
			cmds := make(rueidis.Commands, 0, len(e.Elements))
			for _, k := range e.Elements {
				keys++
				if strings.HasPrefix(k, r.prefix+":{") {
					mailbox++
				}
				cmds = append(cmds, node.B().Pttl().Key(k).Build())
			}
			for _, res := range node.DoMulti(r.ctx, cmds...) {
				if v, err := res.AsInt64(); err == nil && v == -1 {
					noTTL++
				}
			}
			if cursor = e.Cursor; cursor == 0 {
				break
			}
		}
	}
	return keys, mailbox, noTTL
}
