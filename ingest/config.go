package ingest

import (
	"crypto/tls"
	"net/netip"
	"runtime"
	"time"

	"github.com/mayfly/mayfly/ratelimit"
)

// The rule names of the per-IP limits; they name the limiter's keys.
const (
	ConnRuleName      = "smtp-conn"
	MailRuleName      = "smtp-mail"
	RelayConnRuleName = "smtp-relay-conn"
	RelayMailRuleName = "smtp-relay-mail"
)

// Config tunes the SMTP server. Zero values mean the defaults, applied in
// withDefaults.
type Config struct {
	// Domains are the receiving domains; RCPT to any other domain gets
	// 550 5.7.1. Default ["mayfly.test"]. Matched ignoring ASCII case only.
	Domains []string
	// Hostname is the name in the greeting and the EHLO reply. Default
	// "localhost".
	Hostname string
	// MaxMessageBytes is advertised as SIZE and enforced on the bytes
	// received (552 5.3.4). Default 10 MiB.
	MaxMessageBytes int64
	// MaxRecipients per transaction; past it RCPT gets 452 4.5.3 and the
	// sender sends the rest in a new transaction. Default 50.
	MaxRecipients int
	// MaxRefusedRcpts caps the recipients one connection may have refused
	// with 550 (no such mailbox, or a domain not ours): each costs a Redis
	// lookup or is address harvesting. The refusal after that many is
	// 421 4.7.0 instead, and the connection closes. It counts per
	// connection, not per EHLO or transaction. Default 20.
	MaxRefusedRcpts int
	// MaxLineLength bounds one line, of a command or of the message.
	// go-smtp's own default of 2000 (RFC 5321's 1000, doubled) refuses real
	// mail: HTML generators emit unwrapped lines of tens of KiB. Longer
	// lines get 500 5.5.2 and the connection is closed. go-smtp buffers a
	// whole command line, so this is also the memory one session can pin
	// outside DATA. Default 256 KiB.
	MaxLineLength int
	// TLSConfig enables STARTTLS when set. Its GetCertificate, if any, is
	// asked at every handshake: a certificate renewed on disk is served
	// without a restart (cmd/mayfly reloads it).
	TLSConfig *tls.Config
	// RequireTLS refuses MAIL before STARTTLS with 530 5.7.0 (RFC 3207):
	// mail is only ever received encrypted. Needs TLSConfig.
	RequireTLS bool
	// LimitsFailClosed refuses (451 4.3.0) a connection or transaction
	// whose per-IP limit cannot be checked because Redis is unavailable;
	// false (the default) admits it.
	LimitsFailClosed bool
	// ProxyProtocolFrom are the peers (a TCP load balancer) that must open
	// every connection with a PROXY protocol v1 or v2 header: the session's
	// client address, and so every per-IP limit, is the one the header
	// names. A connection from such a peer without a valid header, or with
	// a LOCAL one (a health check), is closed without a greeting. Any other
	// peer is not read for a header at all (SMTP is server-first: the
	// greeting cannot wait for one), so a PROXY line it sends is just an
	// unknown command. Empty: no PROXY protocol.
	ProxyProtocolFrom []netip.Prefix
	// MaxSessions caps the connections one node serves at once; past it a
	// new connection gets 421 4.4.5 and is closed. Default 1000.
	MaxSessions int
	// MaxSessionsPerIP caps the connections of one client (IPv4 address or
	// IPv6 /64) at once on one node: 421 4.7.0. Default 20.
	MaxSessionsPerIP int
	// MaxSessionsPerNet caps the connections of one network (IPv4 /24,
	// IPv6 /48: ratelimit.NetworkPrefix) at once on one node: 421 4.7.0.
	// Default 100: five clients at their cap, a tenth of the default
	// MaxSessions, so filling a node takes ten networks, where one IPv6 /58
	// (64 clients) used to.
	MaxSessionsPerNet int
	// IdleSessionTimeout bounds how long a session may go without finishing
	// a message (from its start or its last DATA, whatever the outcome);
	// commands in between (NOOP, RSET, HELO, refused MAIL or RCPT) do not
	// extend it. When it is up, the session gets go-smtp's 421 4.4.2 and
	// the connection closes. A sender that keeps a connection open between
	// messages uses seconds of it. Default 2 min: otherwise NOOP every 59 s
	// held a slot for the whole SessionTimeout.
	IdleSessionTimeout time.Duration
	// ConnRule limits new connections per client across all nodes: 421
	// 4.7.0. Name defaults to ConnRuleName, Limit to 60, Window to a minute.
	ConnRule ratelimit.Rule
	// MailRule limits transactions (MAIL commands) per client across all
	// nodes: 421 4.7.0. Name defaults to MailRuleName, Limit to 120, Window
	// to a minute.
	MailRule ratelimit.Rule
	// Relays are the clients (after the PROXY protocol, see
	// ProxyProtocolFrom) counted against RelayConnRule and RelayMailRule
	// instead of ConnRule and MailRule: mail relays that send many
	// messages a minute, such as a Postfix with its default
	// smtp_tls_connection_reuse = no, one connection per message. The
	// session caps (MaxSessionsPerIP, MaxSessionsPerNet) still apply.
	// Empty: none.
	Relays []netip.Prefix
	// RelayConnRule limits new connections per relay client across all
	// nodes, as ConnRule does for the others. Name defaults to
	// RelayConnRuleName, Limit to 1000, Window to a minute.
	RelayConnRule ratelimit.Rule
	// RelayMailRule limits transactions per relay client across all nodes,
	// as MailRule does for the others. Name defaults to RelayMailRuleName,
	// Limit to 2000, Window to a minute.
	RelayMailRule ratelimit.Rule
	// MaxParses caps concurrent MIME parses on one node (parsing is CPU
	// bound). Default GOMAXPROCS.
	MaxParses int
	// MaxBufferBytes caps the message bytes all sessions of one node hold in
	// memory at once; a DATA that finds no room gets 451 4.3.1. A transfer
	// reserves what it has received, rounded up to 64 KiB, as it arrives.
	// Default 256 MiB, and never less than MaxMessageBytes.
	MaxBufferBytes int64
	// MaxBufferBytesPerIP caps the part of MaxBufferBytes one client (IPv4
	// address, IPv6 /64) holds on one node; a DATA past it gets 451 4.7.0.
	// Default 32 MiB (an eighth of the default budget, three messages of
	// the largest size), never less than MaxMessageBytes nor more than
	// MaxBufferBytes.
	MaxBufferBytesPerIP int64
	// MinDataRate is the slowest transfer a DATA may keep up, in bytes per
	// second averaged over each DataRateWindow: a transfer that received
	// less in a window is ended with 421 4.4.2 (the connection closes) and
	// its buffer freed. Default 1024 (1 KiB/s); negative: no floor.
	MinDataRate int64
	// DataRateWindow is the window MinDataRate averages over. Default 30 s.
	DataRateWindow time.Duration
	// RedisTimeout bounds each Redis call (recipient check, rate limit, one
	// recipient's delivery). Default 2 s.
	RedisTimeout time.Duration
	// ReadTimeout bounds the wait for each command (idle clients). Default
	// 60 s.
	ReadTimeout time.Duration
	// WriteTimeout bounds each reply write. Default 60 s.
	WriteTimeout time.Duration
	// DataTimeout bounds the whole message transfer of one DATA (slow
	// clients). Default 5 min.
	DataTimeout time.Duration
	// SessionTimeout bounds a whole connection, however busy. Default 15 min.
	SessionTimeout time.Duration
	// LogRate caps the lines a node logs about clients (a refused
	// connection, a message accepted, refused or stored as failed, a Redis
	// error met serving one) per second; the rest are dropped and counted
	// in mayfly_smtp_log_dropped_total. Default 1000.
	LogRate int
	// LogClientIP says how those lines name the client. Default
	// LogClientIPFull.
	LogClientIP LogClientIP
}

func (c Config) withDefaults() Config {
	if len(c.Domains) == 0 {
		c.Domains = []string{"mayfly.test"}
	}
	if c.Hostname == "" {
		c.Hostname = "localhost"
	}
	orDefault := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	orDuration := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	if c.MaxMessageBytes <= 0 {
		c.MaxMessageBytes = 10 << 20
	}
	orDefault(&c.MaxRecipients, 50)
	orDefault(&c.MaxRefusedRcpts, 20)
	orDefault(&c.MaxLineLength, 256<<10)
	orDefault(&c.MaxSessions, 1000)
	orDefault(&c.MaxSessionsPerIP, 20)
	orDefault(&c.MaxSessionsPerNet, 100)
	orDefault(&c.MaxParses, runtime.GOMAXPROCS(0))
	if c.MaxBufferBytes <= 0 {
		c.MaxBufferBytes = 256 << 20
	}
	c.MaxBufferBytes = max(c.MaxBufferBytes, c.MaxMessageBytes)
	if c.MaxBufferBytesPerIP <= 0 {
		c.MaxBufferBytesPerIP = 32 << 20
	}
	c.MaxBufferBytesPerIP = min(max(c.MaxBufferBytesPerIP, c.MaxMessageBytes), c.MaxBufferBytes)
	if c.MinDataRate == 0 {
		c.MinDataRate = 1024
	}
	orDuration(&c.DataRateWindow, 30*time.Second)
	rule := func(r *ratelimit.Rule, name string, limit int) {
		if r.Name == "" {
			r.Name = name
		}
		orDefault(&r.Limit, limit)
		orDuration(&r.Window, time.Minute)
	}
	rule(&c.ConnRule, ConnRuleName, 60)
	rule(&c.MailRule, MailRuleName, 120)
	rule(&c.RelayConnRule, RelayConnRuleName, 1000)
	rule(&c.RelayMailRule, RelayMailRuleName, 2000)
	orDuration(&c.RedisTimeout, 2*time.Second)
	orDuration(&c.ReadTimeout, 60*time.Second)
	orDuration(&c.WriteTimeout, 60*time.Second)
	orDuration(&c.DataTimeout, 5*time.Minute)
	orDuration(&c.SessionTimeout, 15*time.Minute)
	orDuration(&c.IdleSessionTimeout, 2*time.Minute)
	orDefault(&c.LogRate, 1000)
	if c.LogClientIP == "" {
		c.LogClientIP = LogClientIPFull
	}
	return c
}
