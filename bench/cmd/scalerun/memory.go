package main

import (
	"fmt"
	"log"
	"strings"
	"time"
)

// profileParams are the parameters a profile may set (and the table shows).
var profileParams = []string{"hash-max-listpack-value", "hash-max-listpack-entries", "stream-node-max-bytes", "stream-node-max-entries"}

// profile is a set of Redis parameters the memory model runs under.
type profile struct {
	name   string
	params [][2]string
}

// parseProfiles reads "name=param:value,param:value;name2=…".
func parseProfiles(s string) []profile {
	var out []profile
	for _, p := range strings.Split(s, ";") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		name, params, _ := strings.Cut(p, "=")
		pr := profile{name: name}
		for _, kv := range strings.Split(params, ",") {
			if k, v, ok := strings.Cut(kv, ":"); ok {
				pr.params = append(pr.params, [2]string{k, v})
			}
		}
		out = append(out, pr)
	}
	return out
}

// memoryModel measures, on an emptied cluster under profile p, used_memory
// per inbox (created and selected through the API), per owner IP, and per
// 2 KiB message for inboxes holding 1 and 3 (all over SMTP):
//
//	a: k inboxes from k fresh IPs        → inbox + IP (+ its network: one client each)
//	n: k inboxes from k fresh IPs, 50 to a network → inbox + IP + its share of the network's hash
//	b: k inboxes from k/5 fresh IPs      → inbox + IP/5
//	c: one message to each of a's        → the first message
//	d: two more to each of a's           → three messages
//
// The parameters it sets stay set until the next profile, so the last
// profile should be the one the deploy scripts apply.
func (r *run) memoryModel(p profile, k int) {
	r.flushAll()
	var desc []string
	for _, name := range profileParams { // an empty profile: as deployed
		r.configSet(name, r.deployed[name])
	}
	for _, kv := range p.params {
		r.configSet(kv[0], kv[1])
	}
	for _, name := range profileParams {
		desc = append(desc, name+" "+r.configGet(name))
	}
	progress("memory model %q (%s), %d inboxes a step", p.name, strings.Join(desc, ", "), k)
	const settle = 3 * time.Second
	until := func(int) time.Time { return time.Now().Add(10 * time.Minute) }
	m0 := r.memory(settle)
	base := r.freshIPs(k)
	t0 := time.Now()
	a, err := r.openInboxes(k, 32, func(i int) string { return clientIP(base + i) }, until)
	must(err)
	r.createRate = float64(k) / time.Since(t0).Seconds()
	m1 := r.memory(settle)
	nbase := r.freshSharedIPs(k)
	_, err = r.openInboxes(k, 32, func(i int) string { return sharedNetIP(nbase + i) }, until)
	must(err)
	m1n := r.memory(settle)
	base = r.freshIPs(k / 5)
	for range 5 { // each IP once a round, so that none passes 8 requests a second
		_, err = r.openInboxes(k/5, 32, func(i int) string { return clientIP(base + i) }, until)
		must(err)
		time.Sleep(time.Second)
	}
	m2 := r.memory(settle)
	addrs := make([]string, len(a))
	for i, in := range a {
		addrs[i] = in.address
	}
	res := r.deliverSMTP(addrs, "mem1")
	if res.Errors > 0 {
		log.Fatalf("memory model: SMTP: %d errors, first: %s", res.Errors, res.FirstErr)
	}
	m3 := r.memory(settle)
	for j := range 2 {
		res := r.deliverSMTP(addrs, fmt.Sprintf("mem%d", j+2))
		if res.Errors > 0 {
			log.Fatalf("memory model: SMTP: %d errors, first: %s", res.Errors, res.FirstErr)
		}
	}
	m4 := r.memory(settle)
	kf := float64(k)
	withIP := (m1.used - m0.used) / kf
	withMates := (m1n.used - m1.used) / kf
	shared := (m2.used - m1n.used) / kf
	ip := (withIP - shared) * 5 / 4
	one := (m3.used - m2.used) / kf
	three := (m4.used - m2.used) / kf
	fmt.Fprintf(&r.out, "### Memory per inbox: %s\n\n%s; %s inboxes a step, created and selected through the API, 2 KiB multipart messages over SMTP; `used_memory` deltas summed over the primaries (`used_memory_rss` in brackets).\n\n",
		p.name, strings.Join(desc, ", "), thousands(kf))
	fmt.Fprintf(&r.out, "| per | bytes | target |\n|---|---:|---:|\n")
	row := func(what string, v, rss float64, target string) {
		b := thousands(v)
		if rss != 0 { // 0: a derived row, no RSS of its own
			b += " (" + thousands(rss) + ")"
		}
		fmt.Fprintf(&r.out, "| %s | %s | %s |\n", what, b, target)
	}
	row("inbox with its owner IP's limit keys (one inbox per IP)", withIP, (m1.rss-m0.rss)/kf, "≤ 700")
	row(fmt.Sprintf("the same, %d client IPs to a network (IPv4 /24)", netMates), withMates, (m1n.rss-m1.rss)/kf, "")
	row("inbox alone (5 inboxes per IP, IP share removed)", withIP-ip, 0, "")
	row("owner IP (its limiter keys: its hash, and its network's while it is the network's one client)", ip, 0, "")
	row("the first 2 KiB message of an inbox", one, (m3.rss-m2.rss)/kf, "")
	row("inbox + IP + one 2 KiB message", withIP+one, 0, "≤ 3,500")
	row("three 2 KiB messages in one inbox, in all", three, (m4.rss-m2.rss)/kf, "≤ 8,000")
	row("inbox + IP + three 2 KiB messages", withIP+three, 0, "")
	fmt.Fprintln(&r.out)
	progress("memory model %q: inbox+IP %.0f (%.0f with %d IPs a network), IP %.0f, first message %.0f, three messages %.0f", p.name, withIP, withMates, netMates, ip, one, three)
}
