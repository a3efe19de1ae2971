package storage

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/redis/rueidis"
)

// EventType names what happened to a mailbox.
type EventType string

// The events the scripts publish on a mailbox's channel.
const (
	EventMessage  EventType = "message"  // a message was delivered
	EventExtended EventType = "extended" // the expiry moved later
	EventDeleted  EventType = "deleted"  // the mailbox was destroyed
	EventTakeover EventType = "takeover" // a new event stream opened; older ones end
	EventRevoked  EventType = "revoked"  // a session was revoked (the 17th select)
)

// ErrStreamReplaced: a newer event stream of the mailbox took over.
var ErrStreamReplaced = errors.New("storage: event stream replaced by a newer one")

// Event is one pub/sub notification of a mailbox. Pub/sub is a wake-up, not
// the record: the stream is, and a subscriber that may have missed events
// re-reads it.
type Event struct {
	Type      EventType
	Message   Summary   // EventMessage
	ExpiresAt time.Time // EventExtended
	Token     string    // EventTakeover: the token of the stream that took over
	// Node is the id of the cluster node that published a message event:
	// the node whose stream holds that message. Empty when unknown (a node
	// older than the field, or a standalone server): compare only when set.
	Node    string
	session string // EventRevoked: the digest of the revoked session, in hex
}

// Revokes reports whether ev revoked session: a stream opened with it must
// end, since the spec rechecks mailbox access during the stream.
func (ev Event) Revokes(session Credential) bool {
	if ev.Type != EventRevoked {
		return false
	}
	cur, old := session.digestForms()
	return ev.session == hex.EncodeToString([]byte(cur)) || ev.session == old
}

// Channel is the sharded pub/sub channel of the mailbox with tag; it hashes
// to the mailbox's slot, so SSUBSCRIBE reaches the node that publishes.
func (s *Store) Channel(tag string) string { return s.keys.events(tag) }

// ParseEvent decodes a payload published by the storage scripts.
func ParseEvent(payload []byte) (Event, error) {
	var raw struct {
		Type    EventType `json:"type"`
		SID     string    `json:"sid"`
		ID      string    `json:"id"`
		From    string    `json:"from"`
		Subject string    `json:"subject"`
		Status  Status    `json:"status"`
		Expires int64     `json:"expires"`
		Token   string    `json:"token"`
		Session string    `json:"session"`
		Node    string    `json:"node"`
		// The summary of a message event (deliver.lua); events published
		// before the pre-encoded layout carry id, from, subject and status
		// at the top level instead.
		Summary *encodedSummary `json:"summary"`
	}
	if err := json.Unmarshal(payload, &raw); err != nil {
		return Event{}, fmt.Errorf("storage: event: %w", err)
	}
	switch raw.Type {
	case EventMessage:
		to := ""
		if raw.Summary != nil {
			raw.ID, raw.From, raw.Subject, raw.Status = raw.Summary.ID, raw.Summary.From, raw.Summary.Subject, raw.Summary.Status
			to = raw.Summary.To // "" before layout 2026-11-27: the inbox's address
		}
		id, err := uuid.Parse(raw.ID)
		if err != nil {
			return Event{}, fmt.Errorf("storage: event: %w", err)
		}
		return Event{Type: raw.Type, Node: raw.Node, Message: Summary{
			ID: id, To: to, From: raw.From, Subject: raw.Subject, Status: raw.Status,
			StreamID: raw.SID, ReceivedAt: streamTime(raw.SID),
		}}, nil
	case EventExtended:
		return Event{Type: raw.Type, ExpiresAt: msTime(raw.Expires)}, nil
	case EventDeleted:
		return Event{Type: raw.Type}, nil
	case EventTakeover:
		return Event{Type: raw.Type, Token: raw.Token}, nil
	case EventRevoked:
		return Event{Type: raw.Type, session: raw.Session}, nil
	}
	return Event{}, fmt.Errorf("storage: event: unknown type %q", raw.Type)
}

// StreamStart is where a new event stream begins.
type StreamStart struct {
	Mailbox Mailbox
	LastID  string    // stream id of the last entry the stream has covered
	Replay  []Summary // messages after Last-Event-ID, oldest first
	// Node is the id of the cluster node that answered: the node whose
	// stream ids LastID and Replay are ('' when unknown, as Event.Node).
	Node string
}

// StreamRead is what ReadStream found.
type StreamRead struct {
	Messages  []Summary // after the entry asked for, oldest first
	ExpiresAt time.Time // the mailbox's current expiry
	Node      string    // the node that answered, as StreamStart.Node
}

// OpenStream validates session, makes token the mailbox's current event
// stream (publishing a takeover so older streams end, on any node), and
// returns where the stream starts: after the message lastEvent when it is a
// message of this mailbox (replaying up to maxReplay messages after it), else
// at the current end of the mailbox's stream.
// Errors: ErrSessionInvalid, ErrUnavailable.
func (s *Store) OpenStream(ctx context.Context, session Credential, token string, lastEvent uuid.UUID, maxReplay int) (StreamStart, error) {
	last := ""
	if lastEvent != uuid.Nil {
		last = lastEvent.String()
	}
	res, err := s.scripts.streamOpen.Exec(ctx, s.client, s.keys.all(session.Tag), []string{
		session.digests(), token, last, strconv.Itoa(maxReplay),
	}).ToArray()
	if err != nil {
		return StreamStart{}, unavailable("open stream", err)
	}
	if code, _ := res[0].AsInt64(); code != 1 || len(res) < 8 {
		return StreamStart{}, ErrSessionInvalid
	}
	m, err := parseMailbox(res[1:6])
	if err != nil {
		return StreamStart{}, unavailable("open stream", err)
	}
	st := StreamStart{Mailbox: m}
	st.LastID, _ = res[6].ToString()
	st.Node, _ = res[7].ToString()
	if st.Replay, err = parseEntries(res[8:]); err != nil {
		return StreamStart{}, unavailable("open stream", err)
	}
	for i := range st.Replay {
		if st.Replay[i].To == "" {
			st.Replay[i].To = m.Address // stored before layout 2026-11-27
		}
	}
	return st, nil
}

// ReadStream returns up to max messages after the stream entry afterID, for
// the stream token of session's mailbox, with the mailbox's current expiry
// and the node that answered.
// Errors: ErrSessionInvalid (the mailbox expired or was deleted),
// ErrStreamReplaced, ErrUnavailable.
func (s *Store) ReadStream(ctx context.Context, session Credential, token, afterID string, max int) (StreamRead, error) {
	t := session.Tag
	return streamReadReply(s.scripts.streamRead.Exec(ctx, s.client, []string{s.keys.box(t), s.keys.msgs(t)}, []string{
		session.digests(), token, afterID, strconv.Itoa(max),
	}))
}

// streamReadReply decodes stream_read.lua's reply.
func streamReadReply(r rueidis.RedisResult) (StreamRead, error) {
	res, err := r.ToArray()
	if err != nil {
		return StreamRead{}, unavailable("read stream", err)
	}
	switch code, _ := res[0].AsInt64(); {
	case code == 2:
		return StreamRead{}, ErrStreamReplaced
	case code != 1 || len(res) < 3:
		return StreamRead{}, ErrSessionInvalid
	}
	exp, err := res[1].AsInt64()
	if err != nil {
		return StreamRead{}, unavailable("read stream", err)
	}
	node, _ := res[2].ToString()
	out, err := parseEntries(res[3:])
	if err != nil {
		return StreamRead{}, unavailable("read stream", err)
	}
	return StreamRead{Messages: out, ExpiresAt: msTime(exp), Node: node}, nil
}

// StreamReadReq is one stream's part of ReadStreams: ReadStream's arguments.
type StreamReadReq struct {
	Session Credential
	Token   string
	AfterID string
}

// StreamReadResult is ReadStream's answer to one StreamReadReq.
type StreamReadResult struct {
	Read StreamRead
	Err  error
}

// ReadStreams is ReadStream for many streams at once, max messages each:
// the reads go out together, pipelined to each node (one round trip per
// node that holds some of the mailboxes, where one ReadStream each took a
// round trip per stream). It reads only, like ReadStream. The results are
// in the order of reqs.
func (s *Store) ReadStreams(ctx context.Context, reqs []StreamReadReq, max int) []StreamReadResult {
	out := make([]StreamReadResult, len(reqs))
	if len(reqs) == 0 {
		return out
	}
	b := s.client.B()
	sha := s.scripts.streamReadSHA
	cmds := make(rueidis.Commands, len(reqs))
	m := strconv.Itoa(max)
	for i, r := range reqs {
		t := r.Session.Tag
		cmds[i] = b.Evalsha().Sha1(sha).Numkeys(2).Key(s.keys.box(t), s.keys.msgs(t)).
			Arg(r.Session.digests(), r.Token, r.AfterID, m).Build()
	}
	for i, res := range s.client.DoMulti(ctx, cmds...) {
		if err, ok := rueidis.IsRedisErr(res.Error()); ok && err.IsNoScript() {
			// A node that lacks the script (restarted, or new): this one
			// reads the usual way, which loads it.
			out[i].Read, out[i].Err = s.ReadStream(ctx, reqs[i].Session, reqs[i].Token, reqs[i].AfterID, max)
			continue
		}
		out[i].Read, out[i].Err = streamReadReply(res)
	}
	return out
}

func parseEntries(vals []rueidis.RedisMessage) ([]Summary, error) {
	out := make([]Summary, 0, len(vals))
	for i := range vals {
		sum, err := entrySummary(&vals[i])
		if err != nil {
			return nil, err
		}
		out = append(out, sum)
	}
	return out, nil
}
