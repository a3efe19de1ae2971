package storage

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/redis/rueidis"
)

// Config bounds what a mailbox may hold. Zero values mean the defaults.
type Config struct {
	KeyPrefix       string // default "mf"
	MaxMessages     int    // messages per mailbox, oldest evicted first; default 100
	MaxMailboxBytes int    // stored bytes per mailbox, oldest evicted first; default 8 MiB
	MaxMessageBytes int    // stored bytes of one message (from, subject, bodies); default 2 MiB
	MaxSessions     int    // sessions per mailbox, oldest revoked first; default 16
	// MinReplicas is how many replicas must acknowledge a delivery or a
	// creation before it is reported done: 0 (the default) means auto,
	// every replica of the slot's primary that the cluster lists and has not
	// marked failed (however far it lags, or whether its primary reaches
	// it), none when it lists none; N > 0 means that many at least (and
	// every listed one when there are more); a negative value never waits.
	MinReplicas int
	// ReplicaTimeout bounds that wait; past it the write is reported as
	// ErrNotReplicated. Default 200 ms.
	ReplicaTimeout time.Duration
	// Logger gets the failures to read the replica view (rate-limited);
	// nil logs nothing.
	Logger *slog.Logger
	// WriteLayout is the layout the store writes first (one of Layouts;
	// "" is LayoutCurrent); SetWriteLayout changes it. Every layout is read
	// whatever this says.
	WriteLayout string
}

// Defaults returns the documented defaults.
func (c Config) withDefaults() Config {
	if c.KeyPrefix == "" {
		c.KeyPrefix = "mf"
	}
	if c.MaxMessages <= 0 {
		c.MaxMessages = 100
	}
	if c.MaxMailboxBytes <= 0 {
		c.MaxMailboxBytes = 8 << 20
	}
	if c.MaxMessageBytes <= 0 {
		c.MaxMessageBytes = 2 << 20
	}
	if c.MaxSessions <= 0 {
		c.MaxSessions = 16
	}
	if c.ReplicaTimeout <= 0 {
		c.ReplicaTimeout = 200 * time.Millisecond
	}
	if c.WriteLayout == "" {
		c.WriteLayout = LayoutCurrent
	}
	return c
}

// MaxLifetime is the total lifetime of a mailbox: max_expires_at is creation
// plus this, and no extension goes past it.
const MaxLifetime = 60 * time.Minute

// Store keeps mailboxes and messages in Redis. It is safe for concurrent use.
type Store struct {
	client  rueidis.Client
	cfg     Config
	keys    keys
	scripts scripts
	topo    topology
	stats   writeStats
	group   groupCommit
	// layout is the layout the store writes (layout.go).
	layout atomic.Pointer[string]
	// recv holds Listen's subscriptions, made at the first.
	recvOnce sync.Once
	recv     *Receiver
}

// New returns a Store on client.
func New(client rueidis.Client, cfg Config) *Store {
	cfg = cfg.withDefaults()
	s := &Store{client: client, cfg: cfg, keys: keys{prefix: cfg.KeyPrefix}, scripts: loadScripts()}
	s.topo.log = cfg.Logger
	s.layout.Store(&cfg.WriteLayout)
	return s
}

// Config returns the effective configuration.
func (s *Store) Config() Config { return s.cfg }

// Create makes a mailbox with address tag@domain that lives for lifetime
// (at most MaxLifetime). owner is remembered and returned by Destroy and
// Extend, so the caller can free the owner's active-inbox slot. It returns
// the mailbox and its mailbox-scoped credential.
// Errors: ErrUnavailable.
func (s *Store) Create(ctx context.Context, tag, domain string, lifetime time.Duration, owner string) (Mailbox, Credential, error) {
	if !ValidTag(tag) {
		return Mailbox{}, Credential{}, fmt.Errorf("storage: create: invalid tag")
	}
	lifetime = min(lifetime, MaxLifetime)
	id := uuid.New()
	cred := newCredential(tag)
	addr := tag + "@" + LowerASCII(domain)
	res, err := s.exec(ctx, "create", s.scripts.create, s.keys.all(tag), []string{
		id.String(), addr, strconv.FormatInt(lifetime.Milliseconds(), 10),
		strconv.FormatInt(MaxLifetime.Milliseconds(), 10), s.writtenDigest(cred), owner,
	})
	if err != nil {
		// A mailbox that may not survive a failover is not handed out:
		// nobody gets its credential, so it is never used and expires on
		// its own.
		return Mailbox{}, Credential{}, err
	}
	if code, _ := res[0].AsInt64(); code != 1 {
		// The tag is taken: 103 random bits make this a defect, not luck.
		return Mailbox{}, Credential{}, fmt.Errorf("storage: create: tag collision")
	}
	ms, err := int64s(res[1:], 3)
	if err != nil {
		return Mailbox{}, Credential{}, unavailable("create", err)
	}
	return Mailbox{
		ID: id, Address: addr,
		CreatedAt: msTime(ms[0]), ExpiresAt: msTime(ms[1]), MaxExpiresAt: msTime(ms[2]),
	}, cred, nil
}

// Select opens a new session on mailbox id, proven by its mailbox-scoped
// credential, and returns the session credential.
// Errors: ErrMailboxNotFound (expired or destroyed), ErrCredentialInvalid
// (the credential is not this mailbox's), ErrUnavailable.
func (s *Store) Select(ctx context.Context, id uuid.UUID, scoped Credential) (Mailbox, Credential, error) {
	sess := newCredential(scoped.Tag)
	res, err := s.exec(ctx, "select", s.scripts.selectBox, s.keys.all(scoped.Tag), []string{
		id.String(), scoped.digests(), s.writtenDigest(sess), strconv.Itoa(s.cfg.MaxSessions),
	})
	if err != nil {
		return Mailbox{}, Credential{}, err
	}
	switch code, _ := res[0].AsInt64(); code {
	case 0:
		return Mailbox{}, Credential{}, ErrMailboxNotFound
	case 2:
		return Mailbox{}, Credential{}, ErrCredentialInvalid
	}
	m, err := parseMailbox(res[1:])
	if err != nil {
		return Mailbox{}, Credential{}, unavailable("select", err)
	}
	return m, sess, nil
}

// Current returns the mailbox of session.
// Errors: ErrSessionInvalid, ErrUnavailable.
func (s *Store) Current(ctx context.Context, session Credential) (Mailbox, error) {
	res, err := s.scripts.current.Exec(ctx, s.client, []string{s.keys.box(session.Tag)}, []string{session.digests()}).ToArray()
	if err != nil {
		return Mailbox{}, unavailable("current", err)
	}
	if code, _ := res[0].AsInt64(); code != 1 {
		return Mailbox{}, ErrSessionInvalid
	}
	m, err := parseMailbox(res[1:])
	if err != nil {
		return Mailbox{}, unavailable("current", err)
	}
	return m, nil
}

// Extend moves the session's mailbox expiry later by d, never past its
// MaxExpiresAt; the grant may be smaller than d, or zero. It returns the
// mailbox and its owner.
// Errors: ErrSessionInvalid, ErrUnavailable.
func (s *Store) Extend(ctx context.Context, session Credential, d time.Duration) (Mailbox, string, error) {
	res, err := s.exec(ctx, "extend", s.scripts.extend, s.keys.all(session.Tag), []string{
		session.digests(), strconv.FormatInt(d.Milliseconds(), 10),
	})
	if err != nil {
		return Mailbox{}, "", err
	}
	if code, _ := res[0].AsInt64(); code != 1 || len(res) != 7 {
		return Mailbox{}, "", ErrSessionInvalid
	}
	m, err := parseMailbox(res[1:6])
	if err != nil {
		return Mailbox{}, "", unavailable("extend", err)
	}
	owner, _ := res[6].ToString()
	return m, owner, nil
}

// Destroy deletes the session's mailbox with every message, ends every
// session of it, and returns its owner.
// Errors: ErrSessionInvalid, ErrUnavailable.
func (s *Store) Destroy(ctx context.Context, session Credential) (string, error) {
	res, err := s.exec(ctx, "destroy", s.scripts.destroy, s.keys.all(session.Tag), []string{session.digests()})
	if err != nil {
		return "", err
	}
	if code, _ := res[0].AsInt64(); code != 1 || len(res) != 2 {
		return "", ErrSessionInvalid
	}
	owner, _ := res[1].ToString()
	return owner, nil
}

// Messages returns one page of the session's messages, newest first, and
// whether more follow. It is MessagesJSON with every summary decoded.
// Errors: ErrSessionInvalid, ErrUnavailable.
func (s *Store) Messages(ctx context.Context, session Credential, p Page) ([]Summary, bool, error) {
	page, more, err := s.MessagesJSON(ctx, session, p)
	if err != nil {
		return nil, false, err
	}
	out := make([]Summary, len(page))
	for i, e := range page {
		out[i] = Summary{StreamID: e.StreamID, ReceivedAt: e.ReceivedAt}
		if err := decodeSummary(e.JSON, &out[i]); err != nil {
			return nil, false, unavailable("list", err)
		}
	}
	return out, more, nil
}

// MessagesJSON returns one page of the session's messages as stored (the
// summaries pre-encoded), newest first, and whether more follow. A summary
// stored before layout 2026-11-27 gets its "to", the mailbox's address,
// from the box's a field read in the same transaction.
//
// It is the hot path, so it runs no script: one MULTI/EXEC in the mailbox's
// slot reads the server time, the session and expiry fields of the box and
// the page of the stream, and the session is checked here against that
// snapshot. (A script would cost Redis several times more, converting every
// stream entry to Lua and back.)
// Errors: ErrSessionInvalid, ErrUnavailable.
func (s *Store) MessagesJSON(ctx context.Context, session Credential, p Page) ([]Encoded, bool, error) {
	// No mailbox holds more than MaxMessages: a larger offset is past the end,
	// and clamping it keeps XREVRANGE's COUNT bounded.
	offset := min(p.Offset, s.cfg.MaxMessages)
	t, b := session.Tag, s.client.B()
	box, tx, err := s.snapshot(ctx, "list", session, []string{"a"},
		b.Xrevrange().Key(s.keys.msgs(t)).End("+").Start("-").Count(int64(offset+p.Limit+1)).Build())
	if err != nil {
		return nil, false, err
	}
	addr, _ := box[0].ToString()
	entries, err := tx.ToArray()
	if err != nil {
		return nil, false, unavailable("list", err)
	}
	more := len(entries) > offset+p.Limit
	entries = entries[min(offset, len(entries)):min(offset+p.Limit, len(entries))]
	out := make([]Encoded, len(entries))
	for i := range entries {
		if out[i], err = entryJSON(&entries[i]); err != nil {
			return nil, false, unavailable("list", err)
		}
		out[i].JSON = withTo(out[i].JSON, addr)
	}
	return out, more, nil
}

// snapshot runs read in one MULTI/EXEC with TIME and the session and expiry
// fields of the session's box (under both layouts' field names, see
// Credential.digests) followed by fields, checks the session against that
// snapshot, and returns the values of fields and read's reply.
// Errors: ErrSessionInvalid, ErrUnavailable.
func (s *Store) snapshot(ctx context.Context, op string, session Credential, fields []string, read rueidis.Completed) ([]rueidis.RedisMessage, rueidis.RedisMessage, error) {
	b := s.client.B()
	cur, old := session.digestForms()
	res := s.client.DoMulti(ctx,
		b.Multi().Build(),
		b.Time().Build(),
		b.Hmget().Key(s.keys.box(session.Tag)).Field(append([]string{"s:" + cur, "s:" + old, "e"}, fields...)...).Build(),
		read,
		b.Exec().Build())
	for _, r := range res {
		if err := r.Error(); err != nil {
			return nil, rueidis.RedisMessage{}, unavailable(op, err)
		}
	}
	tx, err := res[len(res)-1].ToArray()
	if err != nil || len(tx) != 3 {
		return nil, rueidis.RedisMessage{}, unavailable(op, fmt.Errorf("EXEC reply of %d items: %v", len(tx), err))
	}
	now, err := serverTime(tx[0])
	if err != nil {
		return nil, rueidis.RedisMessage{}, unavailable(op, err)
	}
	f, err := tx[1].ToArray()
	if err != nil || len(f) != 3+len(fields) {
		return nil, rueidis.RedisMessage{}, unavailable(op, fmt.Errorf("HMGET reply of %d items: %v", len(f), err))
	}
	if !liveSession(f[:3], now) {
		return nil, rueidis.RedisMessage{}, ErrSessionInvalid
	}
	return f[3:], tx[2], nil
}

// serverTime parses a TIME reply.
func serverTime(m rueidis.RedisMessage) (time.Time, error) {
	v, err := m.ToArray()
	if err != nil || len(v) != 2 {
		return time.Time{}, fmt.Errorf("TIME reply: %v", err)
	}
	sec, err1 := v[0].AsInt64()
	usec, err2 := v[1].AsInt64()
	if err1 != nil || err2 != nil {
		return time.Time{}, fmt.Errorf("TIME reply: %v %v", err1, err2)
	}
	return time.Unix(sec, usec*1000), nil
}

// liveSession is lib.lua's live_session for an HMGET of the box's session
// field under both names and "e": the session exists and the mailbox has not
// expired.
func liveSession(f []rueidis.RedisMessage, now time.Time) bool {
	if f[0].IsNil() && f[1].IsNil() || f[2].IsNil() {
		return false
	}
	exp, err := f[2].AsInt64()
	return err == nil && exp > now.UnixMilli()
}

// entryJSON reads a stream entry ({id, {field, value, ...}}) as stored.
func entryJSON(m *rueidis.RedisMessage) (Encoded, error) {
	e, err := m.ToArray()
	if err != nil || len(e) != 2 {
		return Encoded{}, fmt.Errorf("stream entry: %v", err)
	}
	sid, err := e[0].ToString()
	if err != nil {
		return Encoded{}, err
	}
	return fieldsJSON(sid, &e[1])
}

// fieldsJSON reads the field list of stream entry sid: its j field, or for
// an entry stored before the pre-encoded layout (fields i, f, s, t) the
// summary encoded from those.
func fieldsJSON(sid string, m *rueidis.RedisMessage) (Encoded, error) {
	fv, err := m.ToArray()
	if err != nil {
		return Encoded{}, err
	}
	out := Encoded{StreamID: sid, ReceivedAt: streamTime(sid)}
	for i := 0; i+1 < len(fv); i += 2 {
		if k, _ := fv[i].ToString(); k == "j" {
			out.JSON, err = fv[i+1].ToString()
			if err == nil && !isObject(out.JSON) {
				err = fmt.Errorf("stream entry %s: stored summary is not a JSON object", sid)
			}
			return out, err
		}
	}
	var sum Summary
	for i := 0; i+1 < len(fv); i += 2 {
		k, _ := fv[i].ToString()
		v, _ := fv[i+1].ToString()
		switch k {
		case "i":
			sum.ID, _ = uuid.Parse(v)
		case "f":
			sum.From = v
		case "s":
			sum.Subject = v
		case "t":
			sum.Status = Status(v)
		}
	}
	out.JSON = encodeSummary(sum)
	return out, nil
}

// isObject is the readers' guard on a stored JSON value: they cut its
// closing brace to append received_at.
func isObject(js string) bool {
	return len(js) >= 2 && js[0] == '{' && js[len(js)-1] == '}'
}

// entrySummary reads a stream entry as a decoded Summary.
func entrySummary(m *rueidis.RedisMessage) (Summary, error) {
	e, err := entryJSON(m)
	if err != nil {
		return Summary{}, err
	}
	sum := Summary{StreamID: e.StreamID, ReceivedAt: e.ReceivedAt}
	return sum, decodeSummary(e.JSON, &sum)
}

// Message returns one message of the session's mailbox: MessageJSON,
// decoded.
// Errors: ErrSessionInvalid, ErrMessageNotFound, ErrUnavailable.
func (s *Store) Message(ctx context.Context, session Credential, id uuid.UUID) (Message, error) {
	e, err := s.MessageJSON(ctx, session, id)
	if err != nil {
		return Message{}, err
	}
	m, err := decodeMessage(e)
	if err != nil {
		return Message{}, unavailable("message", err)
	}
	return m, nil
}

// MessageJSON returns one message of the session's mailbox as stored
// (pre-encoded, bodies included; "to" added as MessagesJSON does), in one
// MULTI/EXEC like MessagesJSON: the
// box maps the message id (its 16 bytes) to its stream id and holds its
// JSON; a message delivered before 2026-11-25 has them in the bodies hash,
// read in the same transaction.
// Errors: ErrSessionInvalid, ErrMessageNotFound, ErrUnavailable.
func (s *Store) MessageJSON(ctx context.Context, session Credential, id uuid.UUID) (Encoded, error) {
	ids := id.String()
	f, r, err := s.snapshot(ctx, "message", session, []string{string(id[:]), string(id[:]) + "m", "a"},
		s.client.B().Hmget().Key(s.keys.bodies(session.Tag)).Field(ids, ids+":m").Build())
	if err != nil {
		return Encoded{}, err
	}
	addr, _ := f[2].ToString()
	var sid string
	if !f[0].IsNil() {
		meta, _ := f[0].ToString()
		sid, _, _ = strings.Cut(meta, " ")
	} else { // stored before 2026-11-25: the bodies hash
		if f, err = r.ToArray(); err != nil || len(f) != 2 {
			return Encoded{}, unavailable("message", fmt.Errorf("HMGET reply: %v", err))
		}
		if f[0].IsNil() {
			return Encoded{}, ErrMessageNotFound
		}
		sid, _ = f[0].ToString()
	}
	if f[1].IsNil() {
		return s.messageBefore(ctx, session, id, addr) // stored before the pre-encoded layout
	}
	js, err := f[1].ToString()
	if err == nil && !isObject(js) {
		err = fmt.Errorf("message %s: stored JSON is not an object", ids)
	}
	if err != nil {
		return Encoded{}, unavailable("message", err)
	}
	return Encoded{StreamID: sid, ReceivedAt: streamTime(sid), JSON: withTo(withID(id, js), addr)}, nil
}

// messageBefore reads a message stored before the pre-encoded layout
// (message.lua) and encodes it, with the mailbox's address addr as its
// recipient.
func (s *Store) messageBefore(ctx context.Context, session Credential, id uuid.UUID, addr string) (Encoded, error) {
	t := session.Tag
	res, err := s.scripts.message.Exec(ctx, s.client, []string{s.keys.box(t), s.keys.msgs(t), s.keys.bodies(t)},
		[]string{session.digests(), id.String()}).ToArray()
	if err != nil {
		return Encoded{}, unavailable("message", err)
	}
	switch code, _ := res[0].AsInt64(); {
	case code == 0:
		return Encoded{}, ErrSessionInvalid
	case code == 2 || len(res) != 5:
		return Encoded{}, ErrMessageNotFound
	}
	sid, _ := res[1].ToString()
	e, err := fieldsJSON(sid, &res[2])
	if err != nil {
		return Encoded{}, unavailable("message", err)
	}
	m := Message{Summary: Summary{StreamID: sid}}
	if err := decodeSummary(e.JSON, &m.Summary); err != nil {
		return Encoded{}, unavailable("message", err)
	}
	m.Text, _ = res[3].ToString()
	m.HTML, _ = res[4].ToString()
	m.To = addr
	e.JSON = encodeMessage(m)
	return e, nil
}

// DeleteMessage deletes one message of the session's mailbox.
// Errors: ErrSessionInvalid, ErrMessageNotFound, ErrUnavailable.
func (s *Store) DeleteMessage(ctx context.Context, session Credential, id uuid.UUID) error {
	t := session.Tag
	res, err := s.exec(ctx, "delete message", s.scripts.deleteMessage, []string{s.keys.box(t), s.keys.msgs(t), s.keys.bodies(t)},
		[]string{session.digests(), id.String()})
	if err != nil {
		return err
	}
	code, err := res[0].AsInt64()
	if err != nil {
		return unavailable("delete message", err)
	}
	switch code {
	case 0:
		return ErrSessionInvalid
	case 2:
		return ErrMessageNotFound
	}
	return nil
}

// splitAddress reads a recipient (ParseRecipient) and returns its inbox's
// tag, and false when it cannot be a Mayfly address: no domain, no valid
// inbox tag, a malformed sub-address (err says which), or a sub-address
// while the store writes a layout that cannot record it (Subaddressing).
func (s *Store) splitAddress(address string) (tag string, r Recipient, ok bool, err error) {
	r, err = ParseRecipient(address)
	if err != nil {
		if !s.Subaddressing() {
			// What releases before sub-addressing answer: no such mailbox.
			return "", Recipient{}, false, nil
		}
		return "", Recipient{}, false, err
	}
	tag = TagOf(r.Box)
	if _, domain, found := strings.Cut(r.Box, "@"); !found || domain == "" || !ValidTag(tag) || r.Tagged() && !s.Subaddressing() {
		return "", Recipient{}, false, nil
	}
	return tag, r, true, nil
}

// Exists reports whether a live mailbox has address, ignoring ASCII case
// only (LowerASCII); for a sub-address local+tag@domain (ParseRecipient),
// whether local@domain has one, while the store writes a layout that
// records the tag (Subaddressing; before it, false).
//
// It is the SMTP recipient check, one native HMGET: the box hash expires
// with the mailbox, and its expiry field is compared with this node's clock
// for the last milliseconds before Redis drops it. Deliver re-checks on the
// Redis clock and is the authority.
// Errors: ErrBadSubaddress, ErrLocalPartTooLong (while Subaddressing),
// ErrUnavailable.
func (s *Store) Exists(ctx context.Context, address string) (bool, error) {
	tag, r, ok, err := s.splitAddress(address)
	if !ok {
		return false, err
	}
	f, err := s.client.Do(ctx, s.client.B().Hmget().Key(s.keys.box(tag)).Field("a", "e").Build()).ToArray()
	if err != nil {
		return false, unavailable("exists", err)
	}
	if len(f) != 2 || f[0].IsNil() || f[1].IsNil() {
		return false, nil
	}
	a, _ := f[0].ToString()
	e, err := f[1].AsInt64()
	return err == nil && a == r.Box && e > time.Now().UnixMilli(), nil
}

// Deliver appends m to the live mailbox at address (case-insensitive; a
// sub-address goes to its inbox, see Exists, and is the message's To) in one
// script call: the summary to the stream, the message (bodies included) to
// the box hash, the oldest messages evicted while the mailbox is over its caps, and
// an event published on the mailbox's channel. Bodies are truncated so the
// message fits MaxMessageBytes (HTML first, at a UTF-8 boundary). m.Key
// dedupes per recipient address: the same bytes sent to an inbox and to a
// sub-address of it are two messages, each with its own To.
// Errors: ErrMailboxNotFound (no live mailbox at address, or a sub-address
// the store does not deliver), ErrUnavailable.
func (s *Store) Deliver(ctx context.Context, address string, m NewMessage) (Summary, error) {
	d, err := s.delivery(address, m)
	if err != nil {
		return Summary{}, err
	}
	res, err := s.exec(ctx, "deliver", s.scripts.deliver, d.keys, d.args)
	return d.result(res, err)
}

// delivery is one Deliver's script call and what its answer is read with.
type delivery struct {
	keys, args []string
	sum        Summary
}

// delivery prepares the script call that stores m at address.
func (s *Store) delivery(address string, m NewMessage) (delivery, error) {
	tag, r, ok, _ := s.splitAddress(address)
	if !ok {
		return delivery{}, ErrMailboxNotFound
	}
	if r.Tagged() && m.Key != "" {
		// A key of its own per sub-address: the key of the raw bytes
		// stays the inbox address's, as before sub-addressing.
		m.Key = DeliveryKey([]byte(m.Key + " " + r.To))
	}
	if !m.Status.Valid() {
		m.Status = StatusFailed
	}
	room := s.cfg.MaxMessageBytes - len(m.From) - len(m.Subject)
	m.HTML = truncate(m.HTML, room-len(m.Text))
	m.Text = truncate(m.Text, room-len(m.HTML))
	size := len(m.From) + len(m.Subject) + len(m.Text) + len(m.HTML)
	id := uuid.New()
	sum := Summary{ID: id, From: m.From, Subject: m.Subject, Status: m.Status}
	if s.Subaddressing() {
		sum.To = r.To // else the layout has no "to": readers add the inbox's address
	}
	key, oldKey := storedKey(m.Key)
	msg, legacy := encodeMessage(Message{Summary: sum, Text: m.Text, HTML: m.HTML}), ""
	if s.writesNov24() {
		legacy = "1" // the bodies hash keeps the message JSON whole
	} else {
		msg = withoutID(id, msg)
	}
	enc := encodeSummary(sum)
	sum.To = r.To
	return delivery{keys: s.keys.all(tag), sum: sum, args: []string{
		r.Box, id.String(), enc, msg,
		strconv.Itoa(size), strconv.Itoa(s.cfg.MaxMessages), strconv.Itoa(s.cfg.MaxMailboxBytes), key, oldKey, string(id[:]),
		legacy,
	}}, nil
}

// result reads the script's reply (or its error from exec).
func (d delivery) result(res []rueidis.RedisMessage, err error) (Summary, error) {
	if err != nil {
		// Stored on the primary maybe, but not safe: the sender retries, and
		// the retry finds this copy by m.Key instead of storing a second one.
		// A "no mailbox" from a node that may not be the primary is no
		// answer either: it must not become a permanent 550.
		return Summary{}, err
	}
	// Only the script's own "no mailbox", {0}, is permanent (550 5.1.1: the
	// sender bounces the mail). Any other reply the script never gives is a
	// temporary failure: the sender retries.
	code, err := res[0].ToInt64()
	if err == nil && code == 0 && len(res) == 1 {
		return Summary{}, ErrMailboxNotFound
	}
	sid, serr := "", error(nil)
	if len(res) == 3 {
		sid, serr = res[1].ToString()
	}
	if err != nil || (code != 1 && code != 2) || len(res) != 3 || serr != nil || sid == "" {
		return Summary{}, unavailable("deliver", fmt.Errorf("unexpected reply %v", res))
	}
	sum := d.sum
	sum.StreamID = sid
	sum.ReceivedAt = streamTime(sid)
	if code == 2 {
		ids, _ := res[2].ToString()
		if sum.ID, err = uuid.Parse(ids); err != nil {
			return Summary{}, unavailable("deliver", fmt.Errorf("duplicate of %q: %w", ids, err))
		}
		sum.Duplicate = true
	}
	return sum, nil
}

// truncate cuts s to at most n bytes without splitting a UTF-8 sequence.
func truncate(s string, n int) string {
	if n <= 0 {
		return ""
	}
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func unavailable(op string, err error) error {
	return fmt.Errorf("%w: %s: %w", ErrUnavailable, op, err)
}

func int64s(vals []rueidis.RedisMessage, n int) ([]int64, error) {
	if len(vals) != n {
		return nil, fmt.Errorf("reply of %d items, want %d", len(vals), n)
	}
	out := make([]int64, n)
	for i := range vals {
		v, err := vals[i].AsInt64()
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

// parseMailbox reads {id, address, created, expires, max}.
func parseMailbox(vals []rueidis.RedisMessage) (Mailbox, error) {
	if len(vals) != 5 {
		return Mailbox{}, fmt.Errorf("mailbox reply of %d items", len(vals))
	}
	ids, _ := vals[0].ToString()
	id, err := uuid.Parse(ids)
	if err != nil {
		return Mailbox{}, err
	}
	addr, _ := vals[1].ToString()
	ms, err := int64s(vals[2:], 3)
	if err != nil {
		return Mailbox{}, err
	}
	return Mailbox{ID: id, Address: addr, CreatedAt: msTime(ms[0]), ExpiresAt: msTime(ms[1]), MaxExpiresAt: msTime(ms[2])}, nil
}

// streamTime is the Redis server time at which a stream entry was added.
func streamTime(sid string) time.Time {
	ms, _, _ := strings.Cut(sid, "-")
	n, _ := strconv.ParseInt(ms, 10, 64)
	return msTime(n)
}

func msTime(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

// ClientOption is how Mayfly connects to Redis: addrs are one standalone
// server or any Cluster seeds (rueidis tells them apart), timeout bounds a
// write to a connection. The topology is refreshed every second: our scripts
// are not retried (a retried write could double-count), so rueidis would
// otherwise not notice a failed-over primary on its own.
func ClientOption(addrs []string, timeout time.Duration) rueidis.ClientOption {
	return rueidis.ClientOption{
		InitAddress:      addrs,
		DisableCache:     true, // no client-side caching: every read must see the latest write
		ShuffleInit:      true,
		ConnWriteTimeout: timeout,
		ClusterOption:    rueidis.ClusterOption{ShardsRefreshInterval: time.Second},
	}
}
