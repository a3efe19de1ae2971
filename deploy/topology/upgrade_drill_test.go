package topology_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mayfly/mayfly/deploy/topology"
	"github.com/mayfly/mayfly/storage"
	"github.com/redis/rueidis"
)

// The mixed-version drill (issue 33, `make drill-upgrade`; a short form runs
// in `make test`): the previous release (previousRelease, built from git)
// and this tree's mayfly side by side on one cluster, behind haproxy, under
// load, while the operator's upgrade of docs/UPGRADING.md is played one node
// at a time:
//
//   - all four nodes on the previous release;
//   - each rolled to this tree writing that release's layout
//     (MAYFLY_STORAGE_WRITE_LAYOUT=2026-11-24);
//   - each rolled back to the previous release (safe until the flip);
//   - each rolled forward again;
//   - each restarted writing the newest layout (storage.LayoutCurrent, the
//     flip of docs/UPGRADING.md).
//
// The short form rolls an edge and an ingest together, so every mixed state
// still runs (old and new edges, old and new ingests, both layouts written
// at once) in about a minute.
//
// Each step runs, besides the continuous load through haproxy (senders, a
// poller, an event stream per inbox, as the failover drills do), mailbox
// flows that cross nodes by addressing them directly: create on one edge,
// select on the other, read on the first, deliver through one ingest, send
// the same raw bytes through both ingests (stored once: the delivery key),
// send one to a sub-address (stored, with its to, only by an ingest writing
// the newest layout; 550 5.1.1 from any other, as from the previous
// release), list, read and delete on the other edge, with an event stream open on one
// of them. After each step it SCANs every primary for keys without a TTL
// under the prefix, and checks each live mailbox's counters (n, b) against
// what it holds. The drill fails on any count of its table that is not 0,
// unless MAYFLY_DRILL_UPGRADE_NO_ASSERT is set (it then only prints the
// table: the run that measures a tree before a fix).

// previousRelease is the release the drill upgrades from (2026-11-24);
// MAYFLY_DRILL_UPGRADE_FROM names another commit, and
// MAYFLY_DRILL_UPGRADE_TO a commit to upgrade to instead of this tree (the
// "before" run of deploy/README.md: 1ec388a, before the write layout).
const previousRelease = "1e86987"

// Write layouts (storage/layout.go), as the drill sets them: the previous
// release's, and the newest, which the flip sets.
const (
	layoutOld = storage.Layout20261124
	layoutNew = storage.LayoutCurrent
)

// upgradeEnv: drillEnv, with a replica a second to acknowledge a write
// (200 ms by default): this drill breaks no Redis node, and on a loaded
// 2-core machine a replica slower than 200 ms answered a select 503 and a
// delivery 451 4.3.0 (1 of each in 17 steps), which says nothing about a
// mixed fleet (the failover drills measure those windows).
var upgradeEnv = append(append([]string{}, drillEnv...),
	"MAYFLY_REDIS_TIMEOUT=2s", "MAYFLY_REDIS_REPLICA_TIMEOUT=1s",
	// A node of this tree drains before it stops: 2 s is haproxy's two
	// failed checks 500 ms apart with room, and keeps the short form's
	// restarts short (the default 5 s is for Kubernetes' probes). The
	// previous release does not drain.
	"MAYFLY_DRAIN_DELAY=2s",
)

// version is what runs on a node: the previous release, or this tree
// writing a layout.
type version string

const (
	vOld    version = "old"
	vNew24  version = "new/" + layoutOld
	vNewest version = "new/" + layoutNew
)

// move is one node restarted on a version.
type move struct {
	kind string // edge, ingest
	i    int
	to   version
}

// upgradeStep is one row: the nodes it restarts, then load.
type upgradeStep struct {
	name  string
	moves []move
}

func upgradePlan(full bool) []upgradeStep {
	label := map[version]string{vOld: "back to the previous release", vNew24: "to this tree, writing " + layoutOld, vNewest: "writing " + layoutNew}
	phases := []struct {
		what string
		to   version
	}{{"roll", vNew24}, {"roll back", vOld}, {"roll again", vNew24}, {"flip", vNewest}}
	plan := []upgradeStep{{name: "0 all on the previous release"}}
	add := func(what string, to version, moves ...move) {
		var names []string
		for i := range moves {
			moves[i].to = to
			names = append(names, fmt.Sprintf("%s%d", moves[i].kind, moves[i].i+1))
		}
		plan = append(plan, upgradeStep{name: fmt.Sprintf("%d %s: %s %s", len(plan), what, strings.Join(names, "+"), label[to]), moves: moves})
	}
	for _, ph := range phases {
		switch {
		case full:
			for _, m := range []move{{kind: "edge", i: 0}, {kind: "ingest", i: 0}, {kind: "edge", i: 1}, {kind: "ingest", i: 1}} {
				add(ph.what, ph.to, m)
			}
		case ph.to == vOld || ph.what == "roll again":
			// The short form rolls back one pair only, and forward
			// again: that mixed state is the one that matters.
			add(ph.what, ph.to, move{kind: "edge", i: 0}, move{kind: "ingest", i: 0})
		default:
			for i := range 2 {
				add(ph.what, ph.to, move{kind: "edge", i: i}, move{kind: "ingest", i: i})
			}
		}
	}
	return plan
}

// stepStats is what one step saw.
type stepStats struct {
	name, nodes string
	writesNew   bool // a node wrote the newest layout during the step

	requests                        atomic.Int64
	f401, f404, f5xx, fConn, fOther atomic.Int64
	smtp250, smtp4xx, smtp5xx       atomic.Int64
	smtp4xxDirect                   atomic.Int64 // of smtp4xx, sent to an ingest node directly
	retried503                      atomic.Int64 // API answers 503 that the client retried
	lost, dups, eventsMissed        atomic.Int64
	flows                           atomic.Int64
	// Sub-addresses (a flow's <tag>+drill-<n>@…): accepted, refused 550
	// 5.1.1 (by a node writing a layout before 2026-11-27, as the previous
	// release does), and wrong: any other answer, an answer the node's
	// layout does not give, or a message stored without its to.
	tagged250, tagged550, taggedWrong atomic.Int64
	noTTL, noTTLNew, counters         int // keys without TTL (and first seen in this step), mailboxes with wrong counters
	noTTLKeys, counterNotes           []string
	scanned, checked                  int // keys scanned, mailboxes with mail whose counters were checked
	// What the live mailboxes hold, by layout: scoped digests as 64 hex
	// digits (2026-11-24) or 16 bytes (2026-11-25 on), messages in the
	// bodies hash (2026-11-24) or in the box (2026-11-25 on).
	digestHex, digestRaw, msgsInBodies, msgsInBox int
	mu                                            sync.Mutex
	classes                                       map[string]int    // failure class → count
	evidence                                      map[string]string // failure class → first example
}

// example records a failure of class (e.g. "401 GET /events") with one
// line of evidence per class.
func (s *stepStats) example(class, line string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.classes == nil {
		s.classes = map[string]int{}
		s.evidence = map[string]string{}
	}
	s.classes[class]++
	if _, ok := s.evidence[class]; !ok {
		s.evidence[class] = line
	}
}

// apiFailed counts every failed API request of the step.
func (s *stepStats) apiFailed() int64 {
	return s.f401.Load() + s.f404.Load() + s.f5xx.Load() + s.fConn.Load() + s.fOther.Load()
}

type upgradeDrill struct {
	t          *testing.T
	tp         *topology.Topology
	rc         rueidis.Client
	bins       map[version]string
	versionsMu sync.Mutex
	versions   map[string]version // "edge1" → what runs there
	edges      []string           // direct API bases, …/v1
	ingests    []string           // direct SMTP addresses

	steps []*stepStats
	cur   atomic.Int32

	// The load through haproxy.
	boxes     []*box
	seq       atomic.Int64
	subjects  sync.Map // subject → step index
	liveMu    sync.Mutex
	live      []string        // tags of the mailboxes the drill keeps (counters)
	noTTLSeen map[string]bool // keys without TTL found by an earlier scan
}

func (d *upgradeDrill) step() *stepStats { return d.steps[d.cur.Load()] }

func TestDrillUpgrade(t *testing.T) {
	from := previousRelease
	if c := os.Getenv("MAYFLY_DRILL_UPGRADE_FROM"); c != "" {
		from = c
	}
	oldBin, err := topology.BuildCommit(from)
	if err != nil {
		t.Fatal(err)
	}
	newBin, err := topology.Binary()
	if to := os.Getenv("MAYFLY_DRILL_UPGRADE_TO"); to != "" {
		newBin, err = topology.BuildCommit(to)
	}
	if err != nil {
		t.Fatal(err)
	}
	full := drillFull()
	senders, nboxes, flowTime, workers := 3, 6, 2500*time.Millisecond, 2
	if full {
		senders, nboxes, flowTime, workers = 8, 12, 6*time.Second, 3
	}
	d := &upgradeDrill{t: t, bins: map[version]string{vOld: oldBin, vNew24: newBin, vNewest: newBin}, noTTLSeen: map[string]bool{},
		versions: map[string]version{"edge1": vOld, "edge2": vOld, "ingest1": vOld, "ingest2": vOld}}
	d.tp = topology.StartBinary(t, oldBin, upgradeEnv...)
	for _, n := range d.tp.Edges {
		d.edges = append(d.edges, "http://"+n.Addr+"/v1")
	}
	for _, n := range d.tp.Ingests {
		d.ingests = append(d.ingests, n.Addr)
	}
	d.rc, err = rueidis.NewClient(rueidis.ClientOption{InitAddress: d.tp.RedisAddrs, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.rc.Close)
	plan := upgradePlan(full)
	for _, s := range plan {
		d.steps = append(d.steps, &stepStats{name: s.name})
	}
	for range nboxes {
		u := newUser(t, d.tp.HTTPURL)
		b := &box{u: u, addr: u.open(), events: map[string]int{}, listed: map[string]bool{}, needList: true}
		d.boxes = append(d.boxes, b)
		d.keep(b.addr)
	}

	load, stopLoad := context.WithCancel(context.Background())
	streamCtx, stopStreams := context.WithCancel(context.Background())
	var wg, streams sync.WaitGroup
	for _, b := range d.boxes {
		streams.Go(func() { d.stream(streamCtx, b) })
	}
	for range senders {
		wg.Go(func() {
			for load.Err() == nil {
				n := d.seq.Add(1)
				d.deliverHA(load, d.boxes[int(n)%len(d.boxes)].addr, n)
			}
		})
	}
	wg.Go(func() { d.poll(load) })

	for i, s := range plan {
		d.cur.Store(int32(i))
		for _, m := range s.moves {
			name := fmt.Sprintf("%s%d", m.kind, m.i+1)
			env := []string{}
			if m.to != vOld {
				env = append(env, "MAYFLY_STORAGE_WRITE_LAYOUT="+strings.TrimPrefix(string(m.to), "new/"))
			}
			start := time.Now()
			d.tp.Restart(m.kind, m.i, d.bins[m.to], env...)
			d.versionsMu.Lock()
			d.versions[name] = m.to
			d.versionsMu.Unlock()
			t.Logf("step %d: %s now %s (restart %v)", i, name, m.to, time.Since(start).Round(time.Millisecond))
		}
		st := d.steps[i]
		d.versionsMu.Lock()
		for _, v := range d.versions {
			st.writesNew = st.writesNew || v == vNewest
		}
		d.versionsMu.Unlock()
		st.nodes = fmt.Sprintf("e1 %s, e2 %s, i1 %s, i2 %s", d.versions["edge1"], d.versions["edge2"], d.versions["ingest1"], d.versions["ingest2"])
		// Flows that cross nodes, on the nodes as they now are.
		var flows sync.WaitGroup
		until := time.Now().Add(flowTime)
		var k atomic.Int64
		for range workers {
			flows.Go(func() {
				for time.Now().Before(until) {
					d.flow(int(k.Add(1)))
				}
			})
		}
		flows.Wait()
		d.scan(st)
	}
	stopLoad()
	wg.Wait()
	d.tp.WaitClusterOK(30 * time.Second)
	time.Sleep(streamSettle)
	stopStreams()
	streams.Wait()
	d.checkBoxes()

	d.table()
	if os.Getenv("MAYFLY_DRILL_UPGRADE_NO_ASSERT") != "" {
		t.Log("MAYFLY_DRILL_UPGRADE_NO_ASSERT: the table is not asserted")
		return
	}
	for _, s := range d.steps {
		if s.apiFailed() != 0 || s.smtp4xxDirect.Load() != 0 || s.smtp5xx.Load() != 0 || s.taggedWrong.Load() != 0 || s.lost.Load() != 0 || s.dups.Load() != 0 ||
			s.eventsMissed.Load() != 0 || s.noTTL != 0 || s.counters != 0 {
			t.Errorf("step %q: %d API requests failed (401 %d, 404 %d, 5xx %d, connection %d, other %d), %d SMTP 4xx/drops from a node addressed directly, %d SMTP 5xx, %d wrong sub-address answers or to, %d lost, %d duplicates, %d events missed, %d keys without TTL, %d mailboxes with wrong counters; want all 0",
				s.name, s.apiFailed(), s.f401.Load(), s.f404.Load(), s.f5xx.Load(), s.fConn.Load(), s.fOther.Load(),
				s.smtp4xxDirect.Load(), s.smtp5xx.Load(), s.taggedWrong.Load(), s.lost.Load(), s.dups.Load(), s.eventsMissed.Load(), s.noTTL, s.counters)
		}
	}
	// Sub-addresses: refused while no node writes the newest layout,
	// delivered once every node does.
	for _, s := range d.steps {
		if !s.writesNew && s.tagged250.Load() != 0 {
			t.Errorf("step %q: no node writes %s, but %d sub-addressed messages were accepted", s.name, layoutNew, s.tagged250.Load())
		}
	}
	if s := d.steps[len(d.steps)-1]; s.tagged250.Load() == 0 || s.tagged550.Load() != 0 {
		t.Errorf("step %q: every node writes %s, but sub-addresses got %d 250s and %d 550s", s.name, layoutNew, s.tagged250.Load(), s.tagged550.Load())
	}
	// The nodes wrote the layout they were told: nothing after 2026-11-24
	// before the flip, and the flipped nodes write it. A previous release
	// named by MAYFLY_DRILL_UPGRADE_FROM may write a newer shape itself
	// (v2026.11.26, e12c037, writes 2026-11-26: the digest and the box of
	// 2026-11-25 on), so the check before the flip holds for the default
	// previous release only.
	fromOther := os.Getenv("MAYFLY_DRILL_UPGRADE_FROM") != ""
	if fromOther {
		t.Log("MAYFLY_DRILL_UPGRADE_FROM: the previous release may write a shape after 2026-11-24; not checked before the flip")
	}
	for _, s := range d.steps {
		if !fromOther && !s.writesNew && (s.digestRaw != 0 || s.msgsInBox != 0) {
			t.Errorf("step %q: no node was told to write %s, but %d live mailboxes have its digest and %d messages are in their box",
				s.name, layoutNew, s.digestRaw, s.msgsInBox)
		}
	}
	if s := d.steps[len(d.steps)-1]; s.digestRaw == 0 || s.msgsInBox == 0 {
		t.Errorf("step %q: every node writes %s, but %d live mailboxes have its digest and %d messages are in their box",
			s.name, layoutNew, s.digestRaw, s.msgsInBox)
	}
	if s := d.steps[0]; s.smtp250.Load() == 0 || s.flows.Load() == 0 {
		t.Errorf("step 0 ran %d flows and got %d 250s: no load", s.flows.Load(), s.smtp250.Load())
	}
}

// keep records the mailbox at addr as one whose counters each step checks.
func (d *upgradeDrill) keep(addr string) {
	tag, _, _ := strings.Cut(addr, "@")
	d.liveMu.Lock()
	d.live = append(d.live, tag)
	d.liveMu.Unlock()
}

// upAnswer is one API answer: its status (0: no answer) and body.
type upAnswer struct {
	code int
	body []byte
}

// call sends one API request with jar and counts it in the current step: a
// status other than want is a failure, by class.
func (d *upgradeDrill) call(jar http.CookieJar, method, url, body string, want int) upAnswer {
	return d.callNote(jar, method, url, body, want, "")
}

// callNote is call with a note for the failure's evidence (how the flow
// made its mailbox). A 503 (a dependency unavailable, or haproxy with no
// edge up) is retried as the spec tells clients, with backoff, up to 4
// times, except a creation (never retried automatically): it counts as
// retried, and as a failure only if the last answer is still not want.
func (d *upgradeDrill) callNote(jar http.CookieJar, method, url, body string, want int, note string) upAnswer {
	st := d.step()
	st.requests.Add(1)
	target, _ := http.NewRequest(method, url, nil)
	class := method + " " + route(target.URL.Path) + " on " + d.where(url)
	var ans upAnswer
	for attempt := 0; ; attempt++ {
		var r io.Reader
		if body != "" {
			r = strings.NewReader(body)
		}
		req, _ := http.NewRequest(method, url, r)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		res, err := (&http.Client{Jar: jar, Timeout: 10 * time.Second}).Do(req)
		if err != nil {
			st.fConn.Add(1)
			st.example("conn "+class, fmt.Sprintf("%v %s", err, note))
			return upAnswer{}
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		ans = upAnswer{res.StatusCode, b}
		if res.StatusCode != 503 || want == 503 || attempt == 4 || (method == "POST" && strings.HasSuffix(url, "/mailboxes")) {
			break
		}
		st.retried503.Add(1)
		st.example("503 retried: "+class, fmt.Sprintf("%.160s %s", b, note))
		time.Sleep(time.Duration(250<<attempt) * time.Millisecond)
	}
	if ans.code != want {
		d.failed(st, ans.code, class, fmt.Sprintf("want %d: %.160s %s", want, ans.body, note))
	}
	return ans
}

// route is path with every uuid as {id}.
func route(path string) string {
	f := strings.Split(strings.TrimPrefix(path, "/v1"), "/")
	for i, p := range f {
		if len(p) == 36 && strings.Count(p, "-") == 4 {
			f[i] = "{id}"
		}
	}
	return strings.Join(f, "/")
}

// where names the node (and what runs there) that url or addr reaches
// directly, or haproxy.
func (d *upgradeDrill) where(url string) string {
	d.versionsMu.Lock()
	defer d.versionsMu.Unlock()
	for i, e := range d.edges {
		if strings.HasPrefix(url, e) {
			return fmt.Sprintf("edge%d (%s)", i+1, d.versions[fmt.Sprintf("edge%d", i+1)])
		}
	}
	for i, a := range d.ingests {
		if url == a {
			return fmt.Sprintf("ingest%d (%s)", i+1, d.versions[fmt.Sprintf("ingest%d", i+1)])
		}
	}
	return "haproxy"
}

func (d *upgradeDrill) failed(st *stepStats, code int, class, line string) {
	switch {
	case code == 401:
		st.f401.Add(1)
	case code == 404:
		st.f404.Add(1)
	case code >= 500:
		st.f5xx.Add(1)
	case code == 0:
		st.fConn.Add(1)
	default:
		st.fOther.Add(1)
	}
	st.example(strconv.Itoa(code)+" "+class, line)
}

// smtp sends msg to rcpt through addr (an ingest node, directly from
// 127.0.0.2, which is not a PROXY-protocol source; or haproxy) once, and
// counts the reply in the current step.
func (d *upgradeDrill) smtp(addr, rcpt string, msg []byte) bool {
	st := d.step()
	from := "127.0.0.1"
	if addr != d.tp.SMTPAddr {
		from = "127.0.0.2"
	}
	code, err := sendFrom(from, addr, rcpt, msg, 15*time.Second)
	switch {
	case err == nil:
		st.smtp250.Add(1)
		return true
	case code >= 500:
		st.smtp5xx.Add(1)
		st.example("SMTP 5xx through "+d.where(addr), err.Error())
	default:
		st.smtp4xx.Add(1)
		if addr != d.tp.SMTPAddr {
			st.smtp4xxDirect.Add(1)
		}
		st.example("SMTP 4xx/drop through "+d.where(addr), err.Error())
	}
	return false
}

// sendFrom is sendOnce from the loopback address from.
func sendFrom(from, addr, to string, msg []byte, deadline time.Duration) (int, error) {
	dialer := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 2 * time.Second}
	return sendVia(func() (net.Conn, error) { return dialer.Dial("tcp", addr) }, to, msg, deadline)
}

type listed struct {
	Data struct {
		Items []struct {
			ID, Subject string
			To          *string
		}
		Pagination struct {
			HasMore bool `json:"has_more"`
		}
	}
}

// flow is one mailbox's life across nodes. Flow k takes edge A = k%2 and B
// the other, ingest X = (k/2)%2 and Y the other, so every pairing runs;
// every fifth flow goes through haproxy for everything instead. Half the
// mailboxes are deleted at the end, half stay for the scans.
func (d *upgradeDrill) flow(k int) {
	st := d.step()
	st.flows.Add(1)
	a, b := d.edges[k%2], d.edges[1-k%2]
	x, y := d.ingests[(k/2)%2], d.ingests[1-(k/2)%2]
	if k%5 == 4 {
		a, b, x, y = d.tp.HTTPURL, d.tp.HTTPURL, d.tp.SMTPAddr, d.tp.SMTPAddr
	}
	jar, _ := cookiejar.New(nil)
	note := fmt.Sprintf("(flow: created on %s, selected on %s, mail through %s then %s)", d.where(a), d.where(b), d.where(x), d.where(y))
	call := func(method, url, body string, want int) upAnswer {
		return d.callNote(jar, method, url, body, want, note)
	}
	var m mailboxReply
	res := call("POST", a+"/mailboxes", "{}", 201)
	if res.code != 201 || json.Unmarshal(res.body, &m) != nil {
		return
	}
	id, addr := m.Data.Mailbox.ID, m.Data.Mailbox.Address
	if call("POST", b+"/mailboxes/"+id+"/select", "", 200).code != 200 {
		return
	}
	call("GET", a+"/mailboxes/current", "", 200)

	// The client's event stream, on A, from before any mail.
	ctx, stop := context.WithCancel(context.Background())
	ev := &box{u: &user{t: d.t, base: a, http: &http.Client{Jar: jar, Timeout: 10 * time.Second}},
		addr: addr, events: map[string]int{}, listed: map[string]bool{}, needList: true}
	opened := make(chan struct{})
	var refused atomic.Bool // the last opening of the stream was refused
	var streamDone sync.WaitGroup
	streamDone.Go(func() { d.streamOn(ctx, ev, a, opened, &refused) })
	select {
	case <-opened:
	case <-time.After(3 * time.Second):
	}

	n := d.seq.Add(1)
	subj1, subj2 := fmt.Sprintf("x-%d-%d", d.cur.Load(), n), fmt.Sprintf("x-%d-%d-twice", d.cur.Load(), n)
	ok1 := d.smtp(x, addr, rawMessage(addr, subj1))
	raw2 := rawMessage(addr, subj2)
	ok2a := d.smtp(x, addr, raw2)
	ok2b := d.smtp(y, addr, raw2) // the same bytes through the other ingest
	tagged, subj3 := strings.Replace(addr, "@", fmt.Sprintf("+drill-%d@", n), 1), fmt.Sprintf("x-%d-%d-tagged", d.cur.Load(), n)
	ok3 := d.subaddress(x, tagged, subj3)

	var l listed
	res = call("GET", b+"/messages?limit=100", "", 200)
	if res.code != 200 || json.Unmarshal(res.body, &l) != nil {
		stop()
		streamDone.Wait()
		return
	}
	ids := map[string]string{}
	count := map[string]int{}
	for _, it := range l.Data.Items {
		ids[it.Subject] = it.ID
		count[it.Subject]++
		want := addr
		if it.Subject == subj3 {
			want = tagged
		}
		// Every message this edge lists says where it went: a node of
		// this tree always has to, the previous release never adds one
		// (and only this tree stores one, to a tag or not).
		if it.To != nil && *it.To != want || it.To == nil && it.Subject == subj3 {
			st.taggedWrong.Add(1)
			st.example("wrong to (flow)", fmt.Sprintf("%s listed by %s with to %v, want %s; %s", it.Subject, d.where(b), it.To, want, note))
		}
	}
	if !ok3 && count[subj3] > 0 {
		st.taggedWrong.Add(1)
		st.example("sub-address refused but stored (flow)", fmt.Sprintf("%s: listed by %s; %s", subj3, d.where(b), note))
	}
	for _, c := range []struct {
		subj string
		ok   bool
	}{{subj1, ok1}, {subj2, ok2a || ok2b}, {subj3, ok3}} {
		if c.ok && count[c.subj] == 0 {
			st.lost.Add(1)
			st.example("lost (flow)", fmt.Sprintf("%s: accepted, not listed by %s; %s", c.subj, d.where(b), note))
		}
		if count[c.subj] > 1 {
			st.dups.Add(int64(count[c.subj] - 1))
			st.example("duplicate (flow)", fmt.Sprintf("%s: %d copies listed by %s; %s", c.subj, count[c.subj], d.where(b), note))
		}
	}
	// Every listed message reaches the stream within two heartbeats (the
	// stream's catch-up) or its list after a reconnect.
	deadline := time.Now().Add(2*2*time.Second + time.Second)
	for {
		missing := 0
		ev.mu.Lock()
		for _, it := range l.Data.Items {
			if ev.events[it.ID] == 0 && !ev.listed[it.ID] {
				missing++
			}
		}
		ev.mu.Unlock()
		// A client refused its stream (401, 404) learns nothing more.
		if missing == 0 || refused.Load() || time.Now().After(deadline) {
			if missing > 0 {
				st.eventsMissed.Add(int64(missing))
				st.example("events missed (flow)", fmt.Sprintf("%d messages reached neither the stream on %s nor a list after a reconnect; %s", missing, d.where(a), note))
			}
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	stop()
	streamDone.Wait()

	if id1 := ids[subj1]; id1 != "" {
		call("GET", a+"/messages/"+id1, "", 200)
		call("DELETE", b+"/messages/"+id1, "", 204)
		call("GET", a+"/messages/"+id1, "", 404)
	}
	if id2 := ids[subj2]; id2 != "" {
		call("GET", b+"/messages/"+id2, "", 200)
	}
	if (k/4)%2 == 0 { // every pairing of edges and ingests both goes and stays
		// Only a mailbox that goes is extended: an extension sets every
		// key's expiry again, which would hide a key written without one.
		call("PATCH", b+"/mailboxes/current", `{"extension_minutes":1}`, 200)
		call("DELETE", a+"/mailboxes/current", "", 204)
		call("GET", b+"/messages", "", 401)
		return
	}
	d.keep(addr) // its keys stay for the TTL scan and the counters
}

// subaddress sends a message to the sub-address rcpt through addr (an
// ingest node directly, or haproxy) and counts the answer: 250 from a node
// writing the newest layout, 550 5.1.1 from any other (the previous
// release's answer to an unknown address); through haproxy either. A 4xx
// or a drop counts as d.smtp counts it. It reports whether the message was
// accepted.
func (d *upgradeDrill) subaddress(addr, rcpt, subject string) bool {
	st := d.step()
	from, direct, writesNew := "127.0.0.1", addr != d.tp.SMTPAddr, false
	if direct {
		from = "127.0.0.2"
		d.versionsMu.Lock()
		for i, a := range d.ingests {
			if a == addr {
				writesNew = d.versions[fmt.Sprintf("ingest%d", i+1)] == vNewest
			}
		}
		d.versionsMu.Unlock()
	}
	code, err := sendFrom(from, addr, rcpt, rawMessage(rcpt, subject), 15*time.Second)
	where := "sub-address through " + d.where(addr)
	switch {
	case err == nil && (!direct || writesNew):
		st.tagged250.Add(1)
		return true
	case code == 550 && strings.Contains(err.Error(), "5.1.1") && (!direct || !writesNew):
		st.tagged550.Add(1)
	case err == nil:
		st.taggedWrong.Add(1)
		st.example("sub-address accepted by a node writing an older layout", where+": "+rcpt)
		return true
	case code >= 500 || code == 550:
		st.taggedWrong.Add(1)
		st.example("sub-address refused: "+strconv.Itoa(code), where+": "+err.Error())
	default:
		st.smtp4xx.Add(1)
		if direct {
			st.smtp4xxDirect.Add(1)
		}
		st.example("SMTP 4xx/drop "+where, err.Error())
	}
	return false
}

func rawMessage(to, subject string) []byte {
	return []byte("From: drill@example.org\r\nTo: " + to + "\r\nSubject: " + subject +
		"\r\nMessage-ID: <" + subject + "@drill.example.org>\r\n\r\nbody of " + subject + "\r\n")
}

// deliverHA sends message n through haproxy as an MTA would (drill.deliver:
// the same bytes again after any 4xx or drop, until a 250 or a 5xx).
func (d *upgradeDrill) deliverHA(ctx context.Context, to string, n int64) {
	step := d.cur.Load()
	subject := fmt.Sprintf("hp-%d-%d", step, n)
	msg := rawMessage(to, subject)
	for ctx.Err() == nil {
		if d.smtp(d.tp.SMTPAddr, to, msg) {
			d.subjects.Store(subject, step)
			return
		}
		pause(ctx, 100*time.Millisecond)
	}
}

// poll reads the haproxy inboxes' lists and their newest message, as
// clients do.
func (d *upgradeDrill) poll(ctx context.Context) {
	for i := 0; ctx.Err() == nil; i++ {
		b := d.boxes[i%len(d.boxes)]
		var l listed
		res := d.call(b.u.http.Jar, "GET", d.tp.HTTPURL+"/messages?limit=5", "", 200)
		if res.code == 200 && json.Unmarshal(res.body, &l) == nil && len(l.Data.Items) > 0 {
			d.call(b.u.http.Jar, "GET", d.tp.HTTPURL+"/messages/"+l.Data.Items[0].ID, "", 200)
		}
		pause(ctx, 20*time.Millisecond)
	}
}

// stream follows b's events through haproxy as the spec tells clients.
func (d *upgradeDrill) stream(ctx context.Context, b *box) {
	d.streamOn(ctx, b, d.tp.HTTPURL, nil, nil)
}

// streamOn keeps an event stream open on base for b (drill.stream: on any
// end, reconnect after a short backoff with Last-Event-ID, and once open,
// list), counting each opening and list as requests of the current step.
// opened is closed when the first stream opens (or fails to); refused, when
// not nil, says whether the last opening was answered 401 or 404.
func (d *upgradeDrill) streamOn(ctx context.Context, b *box, base string, opened chan struct{}, refused *atomic.Bool) {
	var once sync.Once
	signal := func() {
		if opened != nil {
			once.Do(func() { close(opened) })
		}
	}
	defer signal()
	for ctx.Err() == nil {
		st := d.step()
		st.requests.Add(1)
		req, _ := http.NewRequestWithContext(ctx, "GET", base+"/events", nil)
		b.mu.Lock()
		if b.lastID != "" {
			req.Header.Set("Last-Event-ID", b.lastID)
		}
		b.streams++
		b.mu.Unlock()
		res, err := (&http.Client{Jar: b.u.http.Jar}).Do(req)
		switch {
		case err != nil:
			if ctx.Err() == nil {
				st.fConn.Add(1)
				st.example("conn GET /events on "+d.where(base), err.Error())
			}
		case res.StatusCode == 503: // the client reconnects with backoff
			body, _ := io.ReadAll(res.Body)
			st.retried503.Add(1)
			st.example("503 retried: GET /events on "+d.where(base), fmt.Sprintf("%.160s", body))
		case res.StatusCode != 200:
			body, _ := io.ReadAll(res.Body)
			d.failed(st, res.StatusCode, "GET /events on "+d.where(base), fmt.Sprintf("%.160s", body))
			if refused != nil && (res.StatusCode == 401 || res.StatusCode == 404) {
				refused.Store(true)
			}
		default:
			if refused != nil {
				refused.Store(false)
			}
			b.mu.Lock()
			need := b.needList
			b.mu.Unlock()
			if need {
				d.listAll(ctx, b, base)
			}
			signal()
			readEvents(res.Body, func(id string) {
				b.mu.Lock()
				b.events[id]++
				b.lastID = id
				b.mu.Unlock()
			})
		}
		signal()
		if res != nil {
			res.Body.Close()
		}
		if ctx.Err() == nil {
			b.mu.Lock()
			b.needList = true
			b.mu.Unlock()
		}
		pause(ctx, 300*time.Millisecond)
	}
}

// listAll is drill.listAfterOpen on base, counting its requests.
func (d *upgradeDrill) listAll(ctx context.Context, b *box, base string) {
	ids := map[string]bool{}
	for offset := 0; ctx.Err() == nil; {
		var l listed
		res := d.call(b.u.http.Jar, "GET", base+"/messages?limit=100&offset="+strconv.Itoa(offset), "", 200)
		if res.code != 200 || json.Unmarshal(res.body, &l) != nil {
			pause(ctx, 200*time.Millisecond)
			continue
		}
		for _, it := range l.Data.Items {
			ids[it.ID] = true
		}
		if !l.Data.Pagination.HasMore {
			b.mu.Lock()
			for id := range ids {
				b.listed[id] = true
			}
			b.needList = false
			b.mu.Unlock()
			return
		}
		offset += 100
	}
}

// checkBoxes reads every haproxy inbox back (on the last step's nodes) and
// charges each message lost, duplicated or never announced to the step
// that sent it.
func (d *upgradeDrill) checkBoxes() {
	copies := map[string]int{}
	for _, b := range d.boxes {
		ids := map[string]string{}
		for offset := 0; ; offset += 100 {
			var l listed
			if code := b.u.do("GET", "/messages?limit=100&offset="+strconv.Itoa(offset), "", &l); code != 200 {
				d.t.Fatalf("reading %s back: %d", b.addr, code)
			}
			for _, it := range l.Data.Items {
				copies[it.Subject]++
				ids[it.ID] = it.Subject
			}
			if !l.Data.Pagination.HasMore {
				break
			}
		}
		b.mu.Lock()
		for id, subj := range ids {
			if b.events[id] == 0 && !b.listed[id] {
				if s := d.stepOf(subj); s != nil {
					s.eventsMissed.Add(1)
					s.example("events missed (haproxy inboxes)", fmt.Sprintf("%s: neither an event nor listed after a reconnect", subj))
				}
			}
		}
		b.mu.Unlock()
	}
	d.subjects.Range(func(k, v any) bool {
		s := d.steps[v.(int32)]
		switch n := copies[k.(string)]; {
		case n == 0:
			s.lost.Add(1)
			s.example("lost (haproxy senders)", fmt.Sprintf("%s: 250 through haproxy, not stored", k))
		case n > 1:
			s.dups.Add(int64(n - 1))
			s.example("duplicate (haproxy senders)", fmt.Sprintf("%s: %d copies", k, n))
		}
		return true
	})
}

// stepOf is the step that sent the message with subject (hp-<step>-<n>).
func (d *upgradeDrill) stepOf(subject string) *stepStats {
	f := strings.Split(subject, "-")
	if len(f) < 3 {
		return nil
	}
	i, err := strconv.Atoi(f[1])
	if err != nil || i < 0 || i >= len(d.steps) {
		return nil
	}
	return d.steps[i]
}

// scan counts the keys under the prefix without a TTL on every primary
// (each one seen twice, 300 ms apart: a rate-limit counter's INCR and its
// PEXPIRE are two commands) and the live mailboxes whose counters differ
// from what they hold.
func (d *upgradeDrill) scan(st *stepStats) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, p := range d.tp.Primaries() {
		c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{p}, ForceSingleClient: true, DisableCache: true})
		if err != nil {
			d.t.Fatalf("redis %s: %v", p, err)
		}
		noTTL := func(keys []string) []string {
			var out []string
			cmds := make(rueidis.Commands, 0, len(keys))
			for _, k := range keys {
				cmds = append(cmds, c.B().Pttl().Key(k).Build())
			}
			for i, r := range c.DoMulti(ctx, cmds...) {
				if v, err := r.AsInt64(); err == nil && v == -1 {
					out = append(out, keys[i])
				}
			}
			return out
		}
		var suspects []string
		for cursor := uint64(0); ; {
			e, err := c.Do(ctx, c.B().Scan().Cursor(cursor).Match("mf:*").Count(1000).Build()).AsScanEntry()
			if err != nil {
				d.t.Fatalf("SCAN %s: %v", p, err)
			}
			st.scanned += len(e.Elements)
			suspects = append(suspects, noTTL(e.Elements)...)
			if cursor = e.Cursor; cursor == 0 {
				break
			}
		}
		if len(suspects) > 0 {
			time.Sleep(300 * time.Millisecond)
			for _, k := range noTTL(suspects) {
				st.noTTL++
				if d.noTTLSeen[k] {
					continue
				}
				d.noTTLSeen[k] = true
				st.noTTLNew++
				if len(st.noTTLKeys) < 5 {
					typ, _ := c.Do(ctx, c.B().Type().Key(k).Build()).ToString()
					st.noTTLKeys = append(st.noTTLKeys, fmt.Sprintf("%q (%s)", k, typ))
				}
			}
		}
		c.Close()
	}
	d.liveMu.Lock()
	tags := append([]string{}, d.live...)
	d.liveMu.Unlock()
	for _, tag := range tags {
		if note := d.counters(ctx, st, tag); note != "" {
			st.counters++
			if len(st.counterNotes) < 5 {
				st.counterNotes = append(st.counterNotes, note)
			}
		}
	}
}

// countersScript reads a mailbox's box and bodies hashes and the length of
// its stream at once.
var countersScript = rueidis.NewLuaScript(`return {redis.call('HGETALL', KEYS[1]), redis.call('HGETALL', KEYS[2]), redis.call('XLEN', KEYS[3])}`)

// counters compares the box's n and b with the messages the mailbox holds
// in either layout: box fields <16-byte id> = "<stream id> <bytes> [key]",
// bodies fields <uuid>:k = "<bytes>[ key]"; and n with the stream's length.
// It returns "" when they agree or the mailbox is gone.
func (d *upgradeDrill) counters(ctx context.Context, st *stepStats, tag string) string {
	keys := []string{"mf:{" + tag + "}:box", "mf:{" + tag + "}:bodies", "mf:{" + tag + "}:msgs"}
	vals, err := countersScript.Exec(ctx, d.rc, keys, nil).ToArray()
	if err != nil || len(vals) != 3 {
		return fmt.Sprintf("%s: %v", tag, err)
	}
	fields := func(v rueidis.RedisMessage) map[string]string {
		a, _ := v.AsStrSlice()
		m := map[string]string{}
		for i := 0; i+1 < len(a); i += 2 {
			m[a[i]] = a[i+1]
		}
		return m
	}
	box, bodies := fields(vals[0]), fields(vals[1])
	if len(box) == 0 {
		return "" // deleted or expired
	}
	xlen, _ := vals[2].AsInt64()
	var n, sum int64
	for f, v := range box {
		if len(f) == 16 {
			p := bytes.SplitN([]byte(v), []byte(" "), 3)
			if len(p) >= 2 {
				size, _ := strconv.ParseInt(string(p[1]), 10, 64)
				n, sum = n+1, sum+size
			}
		}
	}
	for f, v := range bodies {
		if strings.HasSuffix(f, ":k") {
			size, _ := strconv.ParseInt(strings.SplitN(v, " ", 2)[0], 10, 64)
			n, sum = n+1, sum+size
		}
	}
	if n > 0 {
		st.checked++
	}
	// Which layout wrote it: the scoped digest as 64 hex digits or 16
	// bytes; messages in the bodies hash or in the box.
	switch len(box["k"]) {
	case 64:
		st.digestHex++
	case 16:
		st.digestRaw++
	}
	for f := range box {
		if len(f) == 16 {
			st.msgsInBox++
		}
	}
	for f := range bodies {
		if strings.HasSuffix(f, ":k") {
			st.msgsInBodies++
		}
	}
	gotN, _ := strconv.ParseInt(box["n"], 10, 64)
	gotB, _ := strconv.ParseInt(box["b"], 10, 64)
	if gotN != n || gotB != sum || xlen != n {
		return fmt.Sprintf("%s: n=%d b=%d, stream %d entries; holds %d messages of %d bytes", tag, gotN, gotB, xlen, n, sum)
	}
	return ""
}

// table logs the drill's table and, with MAYFLY_DRILL_REPORT, appends it to
// that file.
func (d *upgradeDrill) table() {
	head := "| step | nodes | API requests | 503 retried | failed: 401 | 404 | 5xx | conn | other | SMTP 250 | 4xx/drops via haproxy | 4xx/drops direct | 5xx | sub-address 250 | 550 | wrong | lost after 250 | duplicates | events missed | keys without TTL (new) | mailboxes with wrong counters |"
	rows := []string{head, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"}
	for _, s := range d.steps {
		rows = append(rows, fmt.Sprintf("| %s | %s | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d (%d) | %d |",
			s.name, s.nodes, s.requests.Load(), s.retried503.Load(), s.f401.Load(), s.f404.Load(), s.f5xx.Load(), s.fConn.Load(), s.fOther.Load(),
			s.smtp250.Load(), s.smtp4xx.Load()-s.smtp4xxDirect.Load(), s.smtp4xxDirect.Load(), s.smtp5xx.Load(),
			s.tagged250.Load(), s.tagged550.Load(), s.taggedWrong.Load(),
			s.lost.Load(), s.dups.Load(), s.eventsMissed.Load(), s.noTTL, s.noTTLNew, s.counters))
	}
	for _, r := range rows {
		d.t.Log("upgrade " + r)
	}
	for _, s := range d.steps {
		var classes []string
		for c := range s.classes {
			classes = append(classes, c)
		}
		sort.Strings(classes)
		for _, c := range classes {
			d.t.Logf("upgrade step %.2s| %dx %s | e.g. %s", s.name, s.classes[c], c, s.evidence[c])
		}
		for _, k := range s.noTTLKeys {
			d.t.Logf("upgrade step %.2s| key without TTL: %s", s.name, k)
		}
		for _, n := range s.counterNotes {
			d.t.Logf("upgrade step %.2s| counters: %s", s.name, n)
		}
		d.t.Logf("upgrade step %.2s| %d flows; %d keys scanned; counters of %d mailboxes with mail checked; live mailboxes with a digest of %s %d, of %s %d; messages in the bodies hash (%s) %d, in the box (%s) %d",
			s.name, s.flows.Load(), s.scanned, s.checked, layoutOld, s.digestHex, layoutNew, s.digestRaw, layoutOld, s.msgsInBodies, layoutNew, s.msgsInBox)
	}
	if f := os.Getenv("MAYFLY_DRILL_REPORT"); f != "" {
		if fh, err := os.OpenFile(f+".upgrade", os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
			fmt.Fprintln(fh, strings.Join(rows, "\n"))
			fh.Close()
		}
	}
}
