package main

import (
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"text/tabwriter"
)

// notNodeSettings are the MAYFLY_* names that belong to something other
// than a node, which a node's environment may carry all the same: the
// scripts export them and start nodes beside them (make run, make test, the
// topology drills, the bench scripts), and a shell that ran the client or
// a client's test suite has them. A node ignores them, and Kubernetes'
// service links (serviceLink); every other MAYFLY_* name that is not in
// settings stops it (unknownSettings), so that a misspelt setting is not
// silently the default. A name ending in * is a
// prefix. Add a name here when a script or a client reads a new one
// (TestEveryMayflyNameIsKnown finds those the repository uses).
var notNodeSettings = []string{
	// make test (deploy/test.sh) and the storagetest helpers
	"MAYFLY_TEST_*", "MAYFLY_FUZZTIME", "MAYFLY_SKIP_FUZZ", "MAYFLY_SKIP_SUITES",
	// deploy/cluster.sh, deploy/lib.sh
	"MAYFLY_CLUSTER_*", "MAYFLY_PORT_*",
	// make run (deploy/run.sh)
	"MAYFLY_RUN_*",
	// haproxy.cfg (deploy/dev.env carries these too) and deploy/topology.sh
	"MAYFLY_LB_*", "MAYFLY_EDGE*", "MAYFLY_INGEST*", "MAYFLY_BIN", "MAYFLY_TOPOLOGY_DIR", "MAYFLY_HAPROXY_CFG",
	// the drills (deploy/topology), deploy/check's rendered overlay
	"MAYFLY_DRILL*", "MAYFLY_K8S_*",
	// the clients: mayfly inbox, the Go, TypeScript and Python clients, the
	// pytest plugin and the example suites
	"MAYFLY_URL", "MAYFLY_INBOX", "MAYFLY_TIMEOUT", "MAYFLY_LIFETIME", "MAYFLY_WAIT_FOR_CAPACITY",
	"MAYFLY_SMTP", "MAYFLY_SUITE*",
}

// serviceLink matches the variables Kubernetes gives a pod for every
// Service of its namespace (enableServiceLinks): a Service named
// mayfly-edge brings MAYFLY_EDGE_SERVICE_HOST, MAYFLY_EDGE_PORT,
// MAYFLY_EDGE_PORT_8080_TCP_ADDR and so on, one named mayfly
// MAYFLY_SERVICE_HOST. No setting ends that way.
var serviceLink = regexp.MustCompile(`^MAYFLY(_[A-Z0-9_]+)?_(SERVICE_HOST|SERVICE_PORT(_[A-Z0-9_]+)?|PORT(_[0-9]+_(TCP|UDP|SCTP)(_ADDR|_PORT|_PROTO)?)?)$`)

// secretSettings are never printed: `mayfly settings` shows whether they
// are set, not what they hold.
var secretSettings = []string{"MAYFLY_REDIS_PASSWORD"}

// notNodeSetting reports whether name is one of notNodeSettings.
func notNodeSetting(name string) bool {
	for _, p := range notNodeSettings {
		if prefix, ok := strings.CutSuffix(p, "*"); ok && strings.HasPrefix(name, prefix) || name == p {
			return true
		}
	}
	return serviceLink.MatchString(name)
}

// lookup returns the getenv of environ (KEY=VALUE, as os.Environ): the
// first mention of a name wins, as with os.Getenv.
func lookup(environ []string) func(string) string {
	env := make(map[string]string, len(environ))
	for _, kv := range environ {
		k, v, _ := strings.Cut(kv, "=")
		if _, seen := env[k]; !seen {
			env[k] = v
		}
	}
	return func(k string) string { return env[k] }
}

// unknownSettings returns an error naming every MAYFLY_* name of environ
// that is neither a setting nor one of notNodeSettings, each with the
// nearest setting when one is close: MAYFLY_TRUSTED_PROXY=10.0.0.0/8 (no
// S) would otherwise start a node that trusts no proxy.
func unknownSettings(environ []string) error {
	var errs []error
	seen := map[string]bool{}
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, "MAYFLY_") || seen[name] || notNodeSetting(name) || isSetting(name) {
			continue
		}
		seen[name] = true
		if near := nearestSetting(name); near != "" {
			errs = append(errs, fmt.Errorf("%s is not a setting: did you mean %s?", name, near))
		} else {
			errs = append(errs, fmt.Errorf("%s is not a setting (mayfly settings lists them; docs/settings.md)", name))
		}
	}
	return errors.Join(errs...)
}

func isSetting(name string) bool {
	return slices.ContainsFunc(settings, func(s setting) bool { return s.env == name })
}

// nearestSetting is the setting closest to name by edit distance (ignoring
// case), or "" when none is within a third of the name's length after
// MAYFLY_: a name that far off is no misspelling of any.
func nearestSetting(name string) string {
	bare := strings.ToUpper(strings.TrimPrefix(name, "MAYFLY_"))
	best, bestD := "", max(2, len(bare)/3)+1
	for _, s := range settings {
		if d := editDistance(bare, strings.TrimPrefix(s.env, "MAYFLY_")); d < bestD {
			best, bestD = s.env, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance of a and b, by bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// printSettings is `mayfly settings`: every setting with the value a node
// started with environ would read, its default, and where the value comes
// from (env or default); a secret's value is masked. It returns what would
// stop such a node: an unknown MAYFLY_* name or a value that does not
// parse (a clamp needs the Redis-free parts only, so it is logged at start).
func printSettings(w io.Writer, environ []string) error {
	getenv := lookup(environ)
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tVALUE\tDEFAULT\tSOURCE")
	show := func(v string) string {
		if v == "" {
			return "(empty)"
		}
		return v
	}
	for _, s := range settings {
		v, source := strings.TrimSpace(getenv(s.env)), "env"
		if slices.Contains(secretSettings, s.env) && getenv(s.env) != "" {
			v = redacted // spaces may belong to a password: set is set
		}
		if v == "" {
			v, source = s.def, "default"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", s.env, show(v), show(s.def), source)
	}
	tw.Flush()
	_, err := loadConfig(getenv)
	return errors.Join(unknownSettings(environ), err)
}
