package main

import (
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mayfly/mayfly/storage"
)

// setting is one environment variable. The table is the single list of
// settings and defaults; docs/settings.md's table must name every one
// (a test checks it).
type setting struct {
	env, def, help string
}

var settings = []setting{
	{"MAYFLY_REDIS_ADDRS", "127.0.0.1:6379", "Redis addresses, comma separated: one standalone server or any Cluster seeds (detected automatically)"},
	{"MAYFLY_REDIS_PREFIX", "mf", "prefix of every Redis key Mayfly writes"},
	{"MAYFLY_REDIS_TIMEOUT", "2s", "budget for the Redis calls of one request; past it the client gets 503 DEPENDENCY_UNAVAILABLE (SMTP: per recipient check or delivery, past it 451 4.3.0)"},
	{"MAYFLY_REDIS_MIN_REPLICAS", "auto", "replicas that must acknowledge a delivery or a creation before SMTP answers 250 (API: 201); auto: every replica of the mailbox's primary that the cluster lists and a majority has not marked failed, however far it lags or whether the primary reaches it (else 451 4.3.0 / 503), and 0 when it lists none (standalone, a cluster without replicas: not durable against losing a primary); N: at least N, and every listed replica when there are more; 0 never waits. While the cluster's view cannot be read (an ACL denying CLUSTER INFO or CLUSTER NODES, -BUSY), writes are refused (451 4.3.0 / 503) but for those the last view read still asks a WAIT for (none, if it was never read)"},
	{"MAYFLY_REDIS_REPLICA_TIMEOUT", "200ms", "how long to wait for that acknowledgement; past it SMTP answers 451 4.3.0 (the retry is stored once) and creation 503 DEPENDENCY_UNAVAILABLE. At least 1ms, and below MAYFLY_REDIS_TIMEOUT (checked at start)"},
	{"MAYFLY_REDIS_USERNAME", "", "Redis ACL user (AUTH username password); empty: the default user. Needs a password"},
	{"MAYFLY_REDIS_PASSWORD", "", "Redis password (requirepass or the ACL user's); prefer MAYFLY_REDIS_PASSWORD_FILE for secrets. Never logged"},
	{"MAYFLY_REDIS_PASSWORD_FILE", "", "file holding the Redis password (a mounted Secret, a systemd credential); one trailing newline is trimmed; setting it and MAYFLY_REDIS_PASSWORD is an error"},
	{"MAYFLY_REDIS_TLS", "false", "true: connect to every Redis node (seeds, discovered primaries and replicas) over TLS, verifying its certificate"},
	{"MAYFLY_REDIS_TLS_CA_FILE", "", "PEM bundle of the CAs that sign the Redis certificates; empty: the system roots"},
	{"MAYFLY_REDIS_TLS_SERVER_NAME", "", "name every Redis certificate is verified against (and sent as SNI); empty: the host of each node's address"},
	{"MAYFLY_REDIS_TLS_CERT_FILE", "", "PEM client certificate for Redis servers that require one (tls-auth-clients yes); with MAYFLY_REDIS_TLS_KEY_FILE"},
	{"MAYFLY_REDIS_TLS_KEY_FILE", "", "PEM private key of MAYFLY_REDIS_TLS_CERT_FILE"},
	{"MAYFLY_REDIS_FLUSH_DELAY", "0s", "how long the Redis client may hold a batch of concurrent commands to send more in one write (rueidis MaxFlushDelay); 0 sends at once. Applies only while commands are in flight concurrently"},
	{"MAYFLY_STORAGE_WRITE_LAYOUT", "", "the storage layout this node writes (docs/UPGRADING.md): 2026-11-24 (what release 2026-11-24 reads: set it while nodes of that release still run), 2026-11-25, 2026-11-26 (what release 2026-11-26 reads), 2026-11-27 (records each message's recipient; the first that delivers sub-addresses local+tag@domain) or 2026-11-28 (2026-11-27 with one rate-limit hash per network instead of one per client IP); empty: the layout the fleet writes (the layout guard in Redis; on a fresh cluster 2026-11-28, on a cluster used by release 2026-11-24 its layout until a node is set to a newer one). Every layout is read whatever this says; a layout some live node cannot read is refused at start"},
	{"MAYFLY_HTTP_ADDR", "127.0.0.1:8080", "public API listener (edge); the API lives under /v1"},
	{"MAYFLY_SMTP_ADDR", "127.0.0.1:2525", "SMTP listener (ingest)"},
	{"MAYFLY_SMTP_HOSTNAME", "", "name in the SMTP greeting and EHLO reply; empty: the machine's hostname"},
	{"MAYFLY_SMTP_MAX_BYTES", "10485760", "largest message accepted over SMTP (advertised as SIZE): a message of exactly this many bytes is accepted, one byte more gets 552 5.3.4"},
	{"MAYFLY_SMTP_MAX_RECIPIENTS", "50", "recipients per SMTP transaction; past it RCPT gets 452 4.5.3"},
	{"MAYFLY_SMTP_MAX_REFUSED_RCPTS", "20", "refused recipients (unknown mailbox or foreign domain) per SMTP connection; the next refusal is 421 4.7.0 and the connection closes"},
	{"MAYFLY_SMTP_MAX_LINE_BYTES", "262144", "longest line of an SMTP command or message; longer gets 500 5.5.2 and the connection closes"},
	{"MAYFLY_SMTP_TLS_CERT", "", "PEM certificate file for STARTTLS; with MAYFLY_SMTP_TLS_KEY, enables STARTTLS"},
	{"MAYFLY_SMTP_TLS_KEY", "", "PEM private key file for STARTTLS"},
	{"MAYFLY_SMTP_TLS_RELOAD", "5s", "how often the node checks MAYFLY_SMTP_TLS_CERT and MAYFLY_SMTP_TLS_KEY for a change (modification time, size); a changed pair is loaded for the next STARTTLS (SIGHUP loads it at once), a pair that does not load keeps the old certificate and logs an error"},
	{"MAYFLY_SMTP_REQUIRE_TLS", "false", "true: MAIL before STARTTLS gets 530 5.7.0 (mail is only received encrypted); needs MAYFLY_SMTP_TLS_CERT"},
	{"MAYFLY_SMTP_PROXY_PROTOCOL_FROM", "", "CIDRs of TCP load balancers that must open every SMTP connection with a PROXY protocol v1/v2 header (haproxy send-proxy-v2), comma separated; per-IP limits then apply to the client it names; empty: no PROXY protocol"},
	{"MAYFLY_SMTP_LIMITS_ON_REDIS_ERROR", "open", "open: an SMTP per-IP limit that cannot be checked because Redis is unavailable admits the connection or transaction; closed: refuses it with 451 4.3.0 (a connection is then closed)"},
	{"MAYFLY_SMTP_MAX_SESSIONS", "1000", "concurrent SMTP connections per ingest node; past it 421 4.4.5"},
	{"MAYFLY_SMTP_SESSIONS_PER_IP", "20", "concurrent SMTP connections per client IP (IPv6: /64) per ingest node; past it 421 4.7.0"},
	{"MAYFLY_SMTP_SESSIONS_PER_NET", "100", "concurrent SMTP connections per network (IPv4 /24, IPv6 /48) per ingest node; past it 421 4.7.0. 100 is five clients at their cap and a tenth of MAYFLY_SMTP_MAX_SESSIONS: filling a node takes ten networks"},
	{"MAYFLY_SMTP_IDLE_SESSION_TIMEOUT", "2m", "how long an SMTP session may go without finishing a message (from its start or its last DATA); NOOP, RSET and refused commands do not extend it; then the session gets 421 4.4.2 and the connection closes"},
	{"MAYFLY_SMTP_CONN_PER_MINUTE", "60", "new SMTP connections per client IP per minute, across all nodes; past it 421 4.7.0"},
	{"MAYFLY_SMTP_MAIL_PER_MINUTE", "120", "SMTP transactions (MAIL FROM) per client IP per minute, across all nodes; past it 421 4.7.0"},
	{"MAYFLY_SMTP_RELAYS", "", "CIDRs of mail relays (a Postfix that relays test mail in), comma separated; their clients (after the PROXY protocol) get MAYFLY_SMTP_RELAY_CONN_PER_MINUTE and MAYFLY_SMTP_RELAY_MAIL_PER_MINUTE instead of the per-client rates; the session caps still apply; empty: none"},
	{"MAYFLY_SMTP_RELAY_CONN_PER_MINUTE", "1000", "new SMTP connections per relay client (MAYFLY_SMTP_RELAYS) per minute, across all nodes; past it 421 4.7.0"},
	{"MAYFLY_SMTP_RELAY_MAIL_PER_MINUTE", "2000", "SMTP transactions (MAIL FROM) per relay client (MAYFLY_SMTP_RELAYS) per minute, across all nodes; past it 421 4.7.0"},
	{"MAYFLY_SMTP_MAX_PARSES", "0", "concurrent MIME parses per ingest node; 0: one per CPU (GOMAXPROCS)"},
	{"MAYFLY_SMTP_BUFFER_BYTES", "268435456", "message bytes all SMTP sessions of a node may hold in memory at once (a transfer holds what it received, rounded up to 64 KiB); past it DATA gets 451 4.3.1"},
	{"MAYFLY_SMTP_BUFFER_BYTES_PER_IP", "33554432", "the part of MAYFLY_SMTP_BUFFER_BYTES one client IP (IPv6: /64) may hold on a node (at least MAYFLY_SMTP_MAX_BYTES); past it DATA gets 451 4.7.0. 32 MiB: three messages of the largest size; filling the default budget takes eight clients"},
	{"MAYFLY_SMTP_MIN_DATA_RATE", "1024", "slowest SMTP message transfer kept, in bytes per second averaged over each MAYFLY_SMTP_DATA_RATE_WINDOW; slower gets 421 4.4.2, the connection closes and its buffer is freed; 0: no floor"},
	{"MAYFLY_SMTP_DATA_RATE_WINDOW", "30s", "the window MAYFLY_SMTP_MIN_DATA_RATE averages over"},
	{"MAYFLY_SMTP_READ_TIMEOUT", "60s", "how long an SMTP session may be idle waiting for a command; then 421 4.4.2"},
	{"MAYFLY_SMTP_DATA_TIMEOUT", "5m", "how long one message transfer may take: a DATA from its 354, a BDAT transfer from its first chunk to its LAST one (the commands between chunks included); then 421 4.4.2 and the connection closes"},
	{"MAYFLY_SMTP_SESSION_TIMEOUT", "15m", "how long one SMTP connection may last, however busy; then 421 4.4.2"},
	{"MAYFLY_HTML_REMOTE_IMAGES", "block", "block: remove remote images from html_body (tracking pixels); allow: keep https images"},
	{"MAYFLY_ADMIN_ADDR", "127.0.0.1:9090", "admin listener: /healthz, /readyz, /metrics, /debug/pprof/; never expose it publicly"},
	{"MAYFLY_ADMIN_PPROF", "auto", "serve /debug/pprof/ on the admin listener: on, off, or auto (only when MAYFLY_ADMIN_ADDR is a loopback address)"},
	{"MAYFLY_DOMAINS", "mayfly.test", "receiving domains, comma separated; each new mailbox gets one at random"},
	{"MAYFLY_COOKIE_PREFIX", "mayfly", "prefix of the mailbox-scoped cookie name (<prefix>_<mailbox uuid without hyphens>)"},
	{"MAYFLY_COOKIE_SECURE", "true", "set the Secure attribute on cookies; false only for plain-HTTP local use"},
	{"MAYFLY_TRUSTED_PROXIES", "", "CIDRs of proxies whose X-Forwarded-For is believed, comma separated; empty trusts no forwarding header"},
	{"MAYFLY_MAX_INFLIGHT", "2048", "concurrent API requests per edge node before 503 REQUEST_PROTECTION"},
	{"MAYFLY_HTTP_MAX_CONNS", "16384", "open HTTP connections per edge node, event streams included; past it a new connection gets 503 REQUEST_PROTECTION and is closed. Kept below 90% of the file-descriptor limit (raised to its hard limit at start)"},
	{"MAYFLY_HTTP_CONNS_PER_IP", "256", "open HTTP connections per client (IPv4 address, IPv6 /64, as the rate limits count) per edge node (MAYFLY_TRUSTED_PROXIES are exempt: a proxy carries many clients); past it 503 REQUEST_PROTECTION and close"},
	{"MAYFLY_HTTP_CONNS_PER_NET", "1024", "open HTTP connections per network (IPv4 /24, IPv6 /48) per edge node, trusted proxies exempt; past it 503 REQUEST_PROTECTION and close. 1,024 is 4 clients at their cap and 1/16 of MAYFLY_HTTP_MAX_CONNS: filling a node takes 16 networks"},
	{"MAYFLY_MAX_STREAMS", "20000", "open event streams (GET /events) per edge node before 503 REQUEST_PROTECTION"},
	{"MAYFLY_EVENTS_HEARTBEAT", "20s", "interval of the event stream's heartbeat comment"},
	{"MAYFLY_MAX_BODY_BYTES", "16384", "largest accepted request body; larger gets 413 BODY_TOO_LARGE"},
	{"MAYFLY_RATE_REQUESTS_PER_SECOND", "8", "requests per second per client IP (fixed one-second window)"},
	{"MAYFLY_RATE_CREATE_PER_MINUTE", "5", "mailbox creations per client IP per minute (failed attempts count)"},
	{"MAYFLY_RATE_CREATE_PER_HOUR", "10", "mailbox creations per client IP per hour"},
	{"MAYFLY_RATE_CREATE_PER_DAY", "20", "mailbox creations per client IP per day"},
	{"MAYFLY_RATE_ACTIVE_PER_IP", "5", "live mailboxes per client IP"},
	{"MAYFLY_RATE_GLOBAL_CREATE_PER_MINUTE", "5000", "mailbox creations per minute across the whole service"},
	{"MAYFLY_RATE_NET_CREATE_PER_MINUTE", "60", "mailbox creations per minute per network (IPv4 /24, IPv6 /48), counting the attempts each client's own limits admitted; past it 429 CREATION_RATE_LIMITED. One network gets at most 1.2% of the default global cap, so one IPv6 /48 (65,536 /64s) cannot take it; a large NAT is one client and meets the per-IP limits first. Never below MAYFLY_RATE_CREATE_PER_MINUTE (a network holds at least one client). Counted while the fleet writes storage layout 2026-11-26 or later"},
	{"MAYFLY_RATE_NET_CREATE_PER_HOUR", "600", "mailbox creations per hour per network (as MAYFLY_RATE_NET_CREATE_PER_MINUTE; never below MAYFLY_RATE_CREATE_PER_HOUR)"},
	{"MAYFLY_RATE_NET_CREATE_PER_DAY", "2000", "mailbox creations per day per network (as MAYFLY_RATE_NET_CREATE_PER_MINUTE; never below MAYFLY_RATE_CREATE_PER_DAY): 100 clients at their day's 20"},
	{"MAYFLY_RATE_NET_ACTIVE", "300", "live mailboxes per network (IPv4 /24, IPv6 /48); past it 429 ACTIVE_INBOX_LIMIT: 60 clients at their cap of 5; never below MAYFLY_RATE_ACTIVE_PER_IP. Counted while the fleet writes storage layout 2026-11-26 or later"},
	{"MAYFLY_MAILBOX_MAX_MESSAGES", "100", "messages kept per mailbox; the oldest is evicted first"},
	{"MAYFLY_MAILBOX_MAX_BYTES", "8388608", "stored bytes per mailbox; the oldest messages are evicted first"},
	{"MAYFLY_MESSAGE_MAX_BYTES", "2097152", "stored bytes of one message (headers shown plus bodies); bodies are truncated to fit"},
	{"MAYFLY_DRAIN_DELAY", "5s", "how long a node keeps serving after SIGTERM (or SIGINT) while /readyz answers 503 draining, so that load balancers stop sending it new work, before it closes its listeners, ends its event streams (clients reconnect elsewhere) and waits MAYFLY_SHUTDOWN_TIMEOUT for what is in flight; 0 closes at once. Keep it above the load balancer's time to take a node out (haproxy.cfg: about 2 s; Kubernetes: the readiness probe's period × failure threshold, plus the endpoints' propagation)"},
	{"MAYFLY_SHUTDOWN_TIMEOUT", "10s", "how long a stopping node waits for requests in flight once its listeners are closed (after MAYFLY_DRAIN_DELAY): an SMTP message being transferred gets its reply, a session between transactions gets 421 at its next command"},
	{"MAYFLY_LOG_LEVEL", "info", "debug, info, warn or error (JSON logs on stderr)"},
	{"MAYFLY_ACCESS_LOG", "errors", "edge access log (one info line per answer: request_id, route pattern, method, status, duration_ms, ip; never a header or cookie): off, errors (status 400 and above) or all"},
	{"MAYFLY_ACCESS_LOG_RATE", "1000", "access-log lines per second per edge node; past it lines are dropped and counted in mayfly_http_access_log_dropped_total"},
	{"MAYFLY_REDIS_ALLOW_EVICTION", "false", "true: start on a Redis whose maxmemory-policy is not noeviction, with a warning (a full Redis then evicts live mailboxes and messages that got a 250: every Mayfly key has a TTL); false: such a Redis stops the node at start (deploy/README.md, Redis settings)"},
	{"MAYFLY_SMTP_LOG_RATE", "1000", "SMTP log lines about clients (a refused connection; a message accepted, refused or stored as failed; a Redis error met serving one) per second per ingest node; past it lines are dropped and counted in mayfly_smtp_log_dropped_total"},
	{"MAYFLY_LOG_CLIENT_IP", "full", "how the access log and the SMTP log name a client (the ip key): full (the address; an IPv6 SMTP client as its /64, as the limits count it), truncated (its network: IPv4 /24, IPv6 /48) or off (no ip key)"},
}

// config is the parsed environment.
type config struct {
	redisAddrs      []string
	redisPrefix     string
	redisTimeout    time.Duration
	redisFlush      time.Duration
	minReplicas     int // storage.Config.MinReplicas: 0 auto, -1 never wait
	replicaTimeout  time.Duration
	redis           redisSecurity
	writeLayout     string // "" follows the fleet (storage.LayoutGuard)
	httpAddr        string
	smtpAddr        string
	smtp            smtpConfig
	adminAddr       string
	adminPprof      string // on, off or auto
	domains         []string
	cookiePrefix    string
	cookieSecure    bool
	trustedProxies  []netip.Prefix
	maxInFlight     int
	maxBodyBytes    int
	maxStreams      int
	maxConns        int
	connsPerIP      int
	connsPerNet     int
	heartbeat       time.Duration
	ratePerSecond   int
	createPerMinute int
	createPerHour   int
	createPerDay    int
	activePerIP     int
	globalPerMinute int
	netPerMinute    int
	netPerHour      int
	netPerDay       int
	netActive       int
	maxMessages     int
	maxMailboxBytes int
	maxMessageBytes int
	drainDelay      time.Duration
	shutdownTimeout time.Duration
	logLevel        slog.Level
	accessLog       string
	accessLogRate   int
	allowEviction   bool // start on an evicting maxmemory-policy, warning
	logClientIP     string
}

// loadConfig reads every setting through getenv, falling back to defaults.
func loadConfig(getenv func(string) string) (config, error) {
	p := parser{getenv: getenv}
	c := config{
		redisAddrs:      p.list("MAYFLY_REDIS_ADDRS"),
		redisPrefix:     p.str("MAYFLY_REDIS_PREFIX"),
		redisTimeout:    p.duration("MAYFLY_REDIS_TIMEOUT"),
		redisFlush:      p.durationOrZero("MAYFLY_REDIS_FLUSH_DELAY"),
		minReplicas:     p.minReplicas("MAYFLY_REDIS_MIN_REPLICAS"),
		replicaTimeout:  p.duration("MAYFLY_REDIS_REPLICA_TIMEOUT"),
		writeLayout:     p.layout("MAYFLY_STORAGE_WRITE_LAYOUT"),
		httpAddr:        p.str("MAYFLY_HTTP_ADDR"),
		smtpAddr:        p.str("MAYFLY_SMTP_ADDR"),
		adminAddr:       p.str("MAYFLY_ADMIN_ADDR"),
		adminPprof:      p.choice("MAYFLY_ADMIN_PPROF", "auto", "on", "off"),
		domains:         p.domains("MAYFLY_DOMAINS"),
		cookiePrefix:    p.cookiePrefix("MAYFLY_COOKIE_PREFIX"),
		cookieSecure:    p.boolean("MAYFLY_COOKIE_SECURE"),
		trustedProxies:  p.prefixes("MAYFLY_TRUSTED_PROXIES"),
		maxInFlight:     p.positive("MAYFLY_MAX_INFLIGHT"),
		maxBodyBytes:    p.positive("MAYFLY_MAX_BODY_BYTES"),
		maxStreams:      p.positive("MAYFLY_MAX_STREAMS"),
		maxConns:        p.positive("MAYFLY_HTTP_MAX_CONNS"),
		connsPerIP:      p.positive("MAYFLY_HTTP_CONNS_PER_IP"),
		connsPerNet:     p.positive("MAYFLY_HTTP_CONNS_PER_NET"),
		heartbeat:       p.duration("MAYFLY_EVENTS_HEARTBEAT"),
		ratePerSecond:   p.positive("MAYFLY_RATE_REQUESTS_PER_SECOND"),
		createPerMinute: p.positive("MAYFLY_RATE_CREATE_PER_MINUTE"),
		createPerHour:   p.positive("MAYFLY_RATE_CREATE_PER_HOUR"),
		createPerDay:    p.positive("MAYFLY_RATE_CREATE_PER_DAY"),
		activePerIP:     p.positive("MAYFLY_RATE_ACTIVE_PER_IP"),
		globalPerMinute: p.positive("MAYFLY_RATE_GLOBAL_CREATE_PER_MINUTE"),
		netPerMinute:    p.positive("MAYFLY_RATE_NET_CREATE_PER_MINUTE"),
		netPerHour:      p.positive("MAYFLY_RATE_NET_CREATE_PER_HOUR"),
		netPerDay:       p.positive("MAYFLY_RATE_NET_CREATE_PER_DAY"),
		netActive:       p.positive("MAYFLY_RATE_NET_ACTIVE"),
		maxMessages:     p.positive("MAYFLY_MAILBOX_MAX_MESSAGES"),
		maxMailboxBytes: p.positive("MAYFLY_MAILBOX_MAX_BYTES"),
		maxMessageBytes: p.positive("MAYFLY_MESSAGE_MAX_BYTES"),
		drainDelay:      p.durationOrZero("MAYFLY_DRAIN_DELAY"),
		shutdownTimeout: p.duration("MAYFLY_SHUTDOWN_TIMEOUT"),
		logLevel:        p.level("MAYFLY_LOG_LEVEL"),
		accessLog:       p.choice("MAYFLY_ACCESS_LOG", "off", "errors", "all"),
		accessLogRate:   p.positive("MAYFLY_ACCESS_LOG_RATE"),
		allowEviction:   p.boolean("MAYFLY_REDIS_ALLOW_EVICTION"),
		logClientIP:     p.choice("MAYFLY_LOG_CLIENT_IP", "full", "truncated", "off"),
	}
	c.smtp = smtpConfig{
		hostname:       p.str("MAYFLY_SMTP_HOSTNAME"),
		maxBytes:       p.positive("MAYFLY_SMTP_MAX_BYTES"),
		maxRecipients:  p.positive("MAYFLY_SMTP_MAX_RECIPIENTS"),
		maxRefused:     p.positive("MAYFLY_SMTP_MAX_REFUSED_RCPTS"),
		maxLineBytes:   p.positive("MAYFLY_SMTP_MAX_LINE_BYTES"),
		tlsCert:        p.str("MAYFLY_SMTP_TLS_CERT"),
		tlsKey:         p.str("MAYFLY_SMTP_TLS_KEY"),
		tlsReload:      p.duration("MAYFLY_SMTP_TLS_RELOAD"),
		requireTLS:     p.boolean("MAYFLY_SMTP_REQUIRE_TLS"),
		maxSessions:    p.positive("MAYFLY_SMTP_MAX_SESSIONS"),
		sessionsPerIP:  p.positive("MAYFLY_SMTP_SESSIONS_PER_IP"),
		sessionsPerNet: p.positive("MAYFLY_SMTP_SESSIONS_PER_NET"),
		idleTimeout:    p.duration("MAYFLY_SMTP_IDLE_SESSION_TIMEOUT"),
		bufferPerIP:    p.positive("MAYFLY_SMTP_BUFFER_BYTES_PER_IP"),
		minDataRate:    p.nonNegative("MAYFLY_SMTP_MIN_DATA_RATE"),
		rateWindow:     p.duration("MAYFLY_SMTP_DATA_RATE_WINDOW"),
		connPerMinute:  p.positive("MAYFLY_SMTP_CONN_PER_MINUTE"),
		mailPerMinute:  p.positive("MAYFLY_SMTP_MAIL_PER_MINUTE"),
		relays:         p.prefixes("MAYFLY_SMTP_RELAYS"),
		relayConn:      p.positive("MAYFLY_SMTP_RELAY_CONN_PER_MINUTE"),
		relayMail:      p.positive("MAYFLY_SMTP_RELAY_MAIL_PER_MINUTE"),
		maxParses:      p.nonNegative("MAYFLY_SMTP_MAX_PARSES"),
		bufferBytes:    p.positive("MAYFLY_SMTP_BUFFER_BYTES"),
		readTimeout:    p.duration("MAYFLY_SMTP_READ_TIMEOUT"),
		dataTimeout:    p.duration("MAYFLY_SMTP_DATA_TIMEOUT"),
		sessionTimeout: p.duration("MAYFLY_SMTP_SESSION_TIMEOUT"),
		remoteImages:   p.choice("MAYFLY_HTML_REMOTE_IMAGES", "block", "allow") == "allow",
		proxyFrom:      p.prefixes("MAYFLY_SMTP_PROXY_PROTOCOL_FROM"),
		limitsClosed:   p.choice("MAYFLY_SMTP_LIMITS_ON_REDIS_ERROR", "open", "closed") == "closed",
		logRate:        p.positive("MAYFLY_SMTP_LOG_RATE"),
	}
	c.redis = p.redisSecurity()
	if len(c.redisAddrs) == 0 {
		p.fail("MAYFLY_REDIS_ADDRS", "must name at least one address")
	}
	// WAIT takes whole milliseconds, and WAIT n 0 waits forever; a WAIT
	// that outlasts MAYFLY_REDIS_TIMEOUT (the connection's read timeout and
	// the budget of the write) ends the connection it runs on.
	switch rt := c.replicaTimeout; {
	case rt > 0 && rt < time.Millisecond:
		p.fail("MAYFLY_REDIS_REPLICA_TIMEOUT", fmt.Sprintf("%v is under 1ms (WAIT counts whole milliseconds, and WAIT 0 never times out)", rt))
	case rt > 0 && c.redisTimeout > 0 && rt >= c.redisTimeout:
		p.fail("MAYFLY_REDIS_REPLICA_TIMEOUT", fmt.Sprintf("%v must be below MAYFLY_REDIS_TIMEOUT (%v): a WAIT that outlasts it ends its connection", rt, c.redisTimeout))
	}
	if (c.smtp.tlsCert == "") != (c.smtp.tlsKey == "") {
		p.fail("MAYFLY_SMTP_TLS_CERT", "MAYFLY_SMTP_TLS_CERT and MAYFLY_SMTP_TLS_KEY must be set together")
	}
	if c.smtp.requireTLS && c.smtp.tlsCert == "" {
		p.fail("MAYFLY_SMTP_REQUIRE_TLS", "needs MAYFLY_SMTP_TLS_CERT and MAYFLY_SMTP_TLS_KEY (no STARTTLS, no mail)")
	}
	return c, p.err
}

// smtpConfig is the ingest node's part of the environment.
type smtpConfig struct {
	hostname       string
	maxBytes       int
	maxRecipients  int
	maxRefused     int
	maxLineBytes   int
	tlsCert        string
	tlsKey         string
	tlsReload      time.Duration
	requireTLS     bool
	maxSessions    int
	sessionsPerIP  int
	sessionsPerNet int
	idleTimeout    time.Duration
	bufferPerIP    int
	minDataRate    int
	rateWindow     time.Duration
	connPerMinute  int
	mailPerMinute  int
	relays         []netip.Prefix // MAYFLY_SMTP_RELAYS
	relayConn      int
	relayMail      int
	maxParses      int
	bufferBytes    int
	readTimeout    time.Duration
	dataTimeout    time.Duration
	sessionTimeout time.Duration
	remoteImages   bool
	proxyFrom      []netip.Prefix
	limitsClosed   bool
	logRate        int
}

// parser collects the first error so loadConfig reads as a list.
type parser struct {
	getenv func(string) string
	err    error
}

func (p *parser) str(name string) string {
	if v := strings.TrimSpace(p.getenv(name)); v != "" {
		return v
	}
	for _, s := range settings {
		if s.env == name {
			return s.def
		}
	}
	panic("undeclared setting " + name) // a defect in this file
}

func (p *parser) fail(name, msg string) {
	if p.err == nil {
		p.err = fmt.Errorf("%s: %s", name, msg)
	}
}

func (p *parser) list(name string) []string {
	var out []string
	for _, v := range strings.Split(p.str(name), ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

func (p *parser) domains(name string) []string {
	out := p.list(name)
	for i, d := range out {
		out[i] = strings.ToLower(d)
		if strings.ContainsAny(d, "@ /") || !strings.Contains(d, ".") {
			p.fail(name, fmt.Sprintf("%q is not a domain name", d))
		}
	}
	if len(out) == 0 {
		p.fail(name, "must name at least one domain")
	}
	return out
}

func (p *parser) cookiePrefix(name string) string {
	v := p.str(name)
	for _, c := range v {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			p.fail(name, "may hold only letters, digits, '-' and '_'")
			break
		}
	}
	return v
}

func (p *parser) boolean(name string) bool {
	b, err := strconv.ParseBool(p.str(name))
	if err != nil {
		p.fail(name, "must be true or false")
	}
	return b
}

func (p *parser) positive(name string) int {
	n, err := strconv.Atoi(p.str(name))
	if err != nil || n <= 0 {
		p.fail(name, "must be a positive integer")
	}
	return n
}

func (p *parser) nonNegative(name string) int {
	n, err := strconv.Atoi(p.str(name))
	if err != nil || n < 0 {
		p.fail(name, "must be an integer of at least 0")
	}
	return n
}

// minReplicas reads "auto" (0: storage decides per slot) or a count, where
// 0 becomes -1 (never wait) in storage.Config's terms.
func (p *parser) minReplicas(name string) int {
	if strings.EqualFold(p.str(name), "auto") {
		return 0
	}
	n := p.nonNegative(name)
	if n == 0 {
		return -1
	}
	return n
}

// choice returns the setting's value, which must be one of allowed.
func (p *parser) choice(name string, allowed ...string) string {
	v := strings.ToLower(p.str(name))
	if !slices.Contains(allowed, v) {
		p.fail(name, "must be one of "+strings.Join(allowed, ", "))
	}
	return v
}

// layout is a storage layout name of storage.Layouts, or "" (follow the
// fleet).
func (p *parser) layout(name string) string {
	v := strings.TrimSpace(p.str(name))
	if v != "" && !storage.ValidLayout(v) {
		p.fail(name, "must be empty or one of "+strings.Join(storage.Layouts, ", "))
	}
	return v
}

func (p *parser) duration(name string) time.Duration {
	d, err := time.ParseDuration(p.str(name))
	if err != nil || d <= 0 {
		p.fail(name, "must be a positive duration such as 2s or 500ms")
	}
	return d
}

func (p *parser) durationOrZero(name string) time.Duration {
	d, err := time.ParseDuration(p.str(name))
	if err != nil || d < 0 {
		p.fail(name, "must be 0 or a positive duration such as 20us")
	}
	return d
}

func (p *parser) prefixes(name string) []netip.Prefix {
	var out []netip.Prefix
	for _, v := range p.list(name) {
		pr, err := netip.ParsePrefix(v)
		if err != nil {
			a, aerr := netip.ParseAddr(v)
			if aerr != nil {
				p.fail(name, fmt.Sprintf("%q is not a CIDR", v))
				continue
			}
			pr = netip.PrefixFrom(a, a.BitLen())
		}
		out = append(out, pr.Masked())
	}
	return out
}

func (p *parser) level(name string) slog.Level {
	var l slog.Level
	if err := l.UnmarshalText([]byte(p.str(name))); err != nil {
		p.fail(name, "must be debug, info, warn or error")
	}
	return l
}
