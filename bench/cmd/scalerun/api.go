package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mayfly/mayfly/bench/internal/load"
)

// clientIP is the i-th address of 10.0.0.0/8 (16 M of them; the bench's
// 198.18.0.0/15 holds only 131,072, fewer than a million inboxes' owners).
// Like load.ClientIP it is only ever sent in X-Forwarded-For.
func clientIP(i int) string {
	n := uint32(i) % (1 << 24)
	// The /24 (10.b.c) changes first: the edge shares creations out per
	// network, and a public service's owners spread over many networks.
	return fmt.Sprintf("10.%d.%d.%d", n>>8&0xff, n&0xff, n>>16)
}

// netMates is how many clients sharedNetIP puts in one /24: fewer than
// MAYFLY_RATE_NET_CREATE_PER_MINUTE's default 60, so that one creation by
// each of them in the same minute is never refused for its network.
const netMates = 50

// sharedNetIP is the i-th address of 172.16.0.0/12, netMates to a /24
// (172.16.0.1–.50, then 172.16.1.1–.50, …; 4,096 networks): clients that
// share their network, where clientIP gives each client one of its own.
// Like clientIP it is only ever sent in X-Forwarded-For.
func sharedNetIP(i int) string {
	net := uint32(i/netMates) % (1 << 12)
	return fmt.Sprintf("172.%d.%d.%d", 16+net>>8, net&0xff, 1+i%netMates)
}

// inbox is one created and selected mailbox.
type inbox struct {
	address string
	cookie  string // the service_session cookie ("name=value"); a secret, never printed
	ip      string
	expires time.Time
}

// apiCall sends one request as client ip and decodes a JSON answer.
func (r *run) apiCall(method, path, ip, cookie, body string, want int, out any) (http.Header, error) {
	req, err := http.NewRequestWithContext(r.ctx, method, r.api+path, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("X-Forwarded-For", ip)
	if cookie != "" {
		req.Header.Set("Cookie", cookie)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := r.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != want {
		return nil, fmt.Errorf("%s %s as %s: status %d: %.200s", method, path, ip, resp.StatusCode, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return nil, err
		}
	}
	return resp.Header, nil
}

// cookieOf returns "name=value" of the Set-Cookie whose name starts with
// prefix.
func cookieOf(h http.Header, prefix string) string {
	for _, sc := range h.Values("Set-Cookie") {
		nv, _, _ := strings.Cut(sc, ";")
		if strings.HasPrefix(nv, prefix) {
			return nv
		}
	}
	return ""
}

type mailboxReply struct {
	Data struct {
		Mailbox struct {
			ID, Address string
			ExpiresAt   time.Time `json:"expires_at"`
		}
	}
}

// openInbox creates an inbox as ip, selects it, and extends it until it
// expires at or after until (each extension at most 10 minutes, the
// spec's).
func (r *run) openInbox(ip string, until time.Time) (inbox, error) {
	life := int(time.Until(until).Minutes() + 0.999) // whole minutes, rounded up
	life = min(max(life, 1), 10)
	var m mailboxReply
	h, err := r.apiCall("POST", "/mailboxes", ip, "", fmt.Sprintf(`{"lifetime_minutes":%d}`, life), 201, &m)
	if err != nil {
		return inbox{}, fmt.Errorf("create: %w", err)
	}
	scoped := cookieOf(h, r.cookiePrefix+"_")
	h, err = r.apiCall("POST", "/mailboxes/"+m.Data.Mailbox.ID+"/select", ip, scoped, "", 200, nil)
	if err != nil {
		return inbox{}, fmt.Errorf("select: %w", err)
	}
	in := inbox{address: m.Data.Mailbox.Address, cookie: cookieOf(h, "service_session="), ip: ip, expires: m.Data.Mailbox.ExpiresAt}
	if in.cookie == "" {
		return inbox{}, fmt.Errorf("select: no service_session cookie (is MAYFLY_COOKIE_SECURE=false?)")
	}
	for in.expires.Before(until) {
		ext := min(max(int(until.Sub(in.expires).Minutes()+0.999), 1), 10)
		var e mailboxReply
		if _, err := r.apiCall("PATCH", "/mailboxes/current", ip, in.cookie, fmt.Sprintf(`{"extension_minutes":%d}`, ext), 200, &e); err != nil {
			return inbox{}, fmt.Errorf("extend: %w", err)
		}
		if !e.Data.Mailbox.ExpiresAt.After(in.expires) {
			break // at max_expires_at
		}
		in.expires = e.Data.Mailbox.ExpiresAt
	}
	return in, nil
}

// openInboxes opens n inboxes from workers goroutines; ip(i) and until(i)
// name the owner and wanted expiry of the i-th.
func (r *run) openInboxes(n, workers int, ip func(i int) string, until func(i int) time.Time) ([]inbox, error) {
	out := make([]inbox, n)
	err := load.Parallel(n, workers, func(i int) error {
		var err error
		out[i], err = r.openInbox(ip(i), until(i))
		return err
	})
	return out, err
}

// getMessages is A's request: GET /messages of a live inbox.
func (r *run) getMessages(in inbox, ip string) error {
	_, err := r.apiCall("GET", "/messages", ip, in.cookie, "", 200, nil)
	return err
}

// deleteInbox is DELETE /mailboxes/current.
func (r *run) deleteInbox(in inbox) error {
	_, err := r.apiCall("DELETE", "/mailboxes/current", in.ip, in.cookie, "", 204, nil)
	return err
}

// loadA runs A's shape for d: workers goroutines GET /messages of the
// sample inboxes in turn, as client IPs of their own range (base), each
// well under the 8 requests a second.
func (r *run) loadA(sample []inbox, d time.Duration, workers, base int) load.Result {
	var (
		mu   sync.Mutex
		lat  []time.Duration
		errs int
		next atomic.Int64
		ferr string
	)
	start := time.Now()
	stop := start.Add(d)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			my := make([]time.Duration, 0, 4096)
			for time.Now().Before(stop) && r.ctx.Err() == nil {
				i := int(next.Add(1))
				t0 := time.Now()
				err := r.getMessages(sample[i%len(sample)], clientIP(base+i%16384))
				if err != nil {
					mu.Lock()
					errs++
					if ferr == "" {
						ferr = err.Error()
					}
					mu.Unlock()
					continue
				}
				my = append(my, time.Since(t0))
			}
			mu.Lock()
			lat = append(lat, my...)
			mu.Unlock()
		})
	}
	wg.Wait()
	res := load.Summarize("A", lat, errs, time.Since(start))
	res.FirstErr = ferr
	return res
}
