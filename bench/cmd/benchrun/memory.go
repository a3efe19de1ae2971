package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/mayfly/mayfly/bench/internal/load"
	"github.com/mayfly/mayfly/ratelimit"
	"github.com/mayfly/mayfly/storage"
)

func jsonUnmarshal(s string, v any) error { return json.Unmarshal([]byte(s), v) }

// The key names below mirror docs/ARCHITECTURE.md (storage and ratelimit
// keep theirs unexported): the memory model reads them with MEMORY USAGE.
func boxKeys(tag string) []string {
	return []string{"mf:{" + tag + "}:box", "mf:{" + tag + "}:msgs", "mf:{" + tag + "}:bodies"}
}

// ownerKeys are a client IP's creation keys in every layout; its
// network's are shared with the network's other clients.
func ownerKeys(ip string) []string { return ratelimit.CreationKeys("mf", ip) }

func (b *bench) memoryUsage(ctx context.Context, keys []string) (int64, error) {
	var sum int64
	for _, k := range keys {
		n, err := b.rdb.Do(ctx, b.rdb.B().MemoryUsage().Key(k).Samples(0).Build()).AsInt64()
		if err != nil && !isNil(err) {
			return 0, fmt.Errorf("MEMORY USAGE %s: %w", k, err)
		}
		sum += n
	}
	return sum, nil
}

func isNil(err error) bool { return err != nil && err.Error() == "redis nil message" }

// memoryModel measures, over a sample made through the API and SMTP, the
// Redis memory of an empty mailbox, of its owner's limit keys, and of one
// stored 2 KiB message.
func (b *bench) memoryModel(ctx context.Context) error {
	const sample, withMail, perBox = 100, 20, 10
	base := b.ips
	boxes, err := b.openInboxes(sample)
	if err != nil {
		return err
	}
	progress("M: MEMORY USAGE over %d inboxes and %d messages", sample, withMail*perBox)
	var box, owner int64
	seen := map[string]bool{} // a fold is counted once for the clients sharing it
	for i, m := range boxes {
		n, err := b.memoryUsage(ctx, boxKeys(storage.TagOf(m.Address)))
		if err != nil {
			return err
		}
		box += n
		ip := load.ClientIP(base, i)
		var keys []string
		for _, k := range ownerKeys(ip) {
			if !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
		if n, err = b.memoryUsage(ctx, keys); err != nil {
			return err
		}
		if n == 0 && len(keys) == len(ownerKeys(ip)) {
			return fmt.Errorf("no limit keys for %s: does ownerKeys still match ratelimit/keys.go?", ip)
		}
		owner += n
	}
	var before, after int64
	for _, m := range boxes[:withMail] {
		tag := storage.TagOf(m.Address)
		n, err := b.memoryUsage(ctx, boxKeys(tag))
		if err != nil {
			return err
		}
		before += n
		for j := range perBox {
			if err := b.send(m.Address, load.Message("mem-"+tag+"-"+strconv.Itoa(j), 2048)); err != nil {
				return err
			}
		}
		if n, err = b.memoryUsage(ctx, boxKeys(tag)); err != nil {
			return err
		}
		after += n
	}
	b.fig("M", "empty mailbox (box hash)", "bytes").add(float64(box) / sample)
	b.fig("M", "per owner IP (its creation keys; a network's fold shared by its clients)", "bytes").add(float64(owner) / sample)
	b.fig("M", "per stored 2 KiB multipart message (stream entry + bodies)", "bytes").add(float64(after-before) / (withMail * perBox))
	return nil
}
