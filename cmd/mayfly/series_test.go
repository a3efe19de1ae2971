package main

import (
	"bytes"
	"cmp"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/mayfly/mayfly/edge"
	"github.com/mayfly/mayfly/ingest"
	"github.com/mayfly/mayfly/storage"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

var update = flag.Bool("update", false, "rewrite deploy/prometheus/series.json from the nodes' registrations")

// seriesFile lists every mayfly_* series a node registers, for the checks
// of the dashboard and the alert rules (deploy/deploy_test.go and
// deploy/check), which cannot import this package.
const seriesFile = "../../deploy/prometheus/series.json"

// series is one metric name as the nodes register it.
type series struct {
	Name string `json:"name"`
	// Type is counter, gauge, histogram, summary or untyped: a histogram's
	// series are Name_bucket (with le), Name_sum and Name_count.
	Type string `json:"type"`
	// Labels are its label names, constant ones included, sorted.
	Labels []string `json:"labels"`
	// Values are the values of the labels that are constant in each
	// collector (mayfly_durable_writes_total's outcome): the whole set.
	Values map[string][]string `json:"values,omitempty"`
	Nodes  []string            `json:"nodes"` // edge, ingest
	Help   string              `json:"help"`
}

// recorder is a prometheus.Registerer that keeps the descriptors of every
// collector registered on it, not their samples: a vector nothing has
// observed yet (no route served, no refusal) has no sample in a scrape but
// is a series a query may name.
type recorder struct {
	node   string
	series map[string]*series
}

func (r *recorder) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

func (r *recorder) Unregister(prometheus.Collector) bool { return false }

// descRE is Desc.String()'s format (client_golang's desc.go); quoted parts
// are read with strconv.
var descRE = regexp.MustCompile(`^Desc\{fqName: ("(?:[^"\\]|\\.)*"), help: ("(?:[^"\\]|\\.)*"), (?:unit: "(?:[^"\\]|\\.)*", )?constLabels: \{(.*)\}, variableLabels: \{(.*)\}\}$`)

func (r *recorder) Register(c prometheus.Collector) error {
	// The type: a vector's from its Go type (it may have no sample yet),
	// anything else's from what it collects.
	vecType := ""
	switch c.(type) {
	case *prometheus.CounterVec:
		vecType = "counter"
	case *prometheus.GaugeVec:
		vecType = "gauge"
	case *prometheus.HistogramVec:
		vecType = "histogram"
	case *prometheus.SummaryVec:
		vecType = "summary"
	}
	collected := map[string]string{} // Desc.String() → type
	if vecType == "" {
		ch := make(chan prometheus.Metric)
		go func() { c.Collect(ch); close(ch) }()
		for m := range ch {
			var pb dto.Metric
			if err := m.Write(&pb); err != nil {
				return err
			}
			typ := "untyped"
			switch {
			case pb.Counter != nil:
				typ = "counter"
			case pb.Gauge != nil:
				typ = "gauge"
			case pb.Histogram != nil:
				typ = "histogram"
			case pb.Summary != nil:
				typ = "summary"
			}
			collected[m.Desc().String()] = typ
		}
	}
	ch := make(chan *prometheus.Desc)
	go func() { c.Describe(ch); close(ch) }()
	for d := range ch {
		m := descRE.FindStringSubmatch(d.String())
		if m == nil {
			return fmt.Errorf("unexpected descriptor %s", d)
		}
		name, err1 := strconv.Unquote(m[1])
		help, err2 := strconv.Unquote(m[2])
		if err := cmp.Or(err1, err2); err != nil {
			return fmt.Errorf("descriptor %s: %w", d, err)
		}
		typ := cmp.Or(vecType, collected[d.String()])
		if typ == "" {
			return fmt.Errorf("%s: collected nothing, its type is unknown", name)
		}
		s := r.series[name]
		if s == nil {
			s = &series{Name: name, Type: typ, Help: help, Labels: []string{}, Values: map[string][]string{}}
			r.series[name] = s
		}
		if s.Type != typ {
			return fmt.Errorf("%s registered as %s and %s", name, s.Type, typ)
		}
		if !slices.Contains(s.Nodes, r.node) {
			s.Nodes = append(s.Nodes, r.node)
		}
		for _, pair := range splitTop(m[3]) {
			k, v, _ := strings.Cut(pair, "=")
			val, err := strconv.Unquote(v)
			if err != nil {
				return fmt.Errorf("descriptor %s: %w", d, err)
			}
			s.Values[k] = sortedAdd(s.Values[k], val)
			s.Labels = sortedAdd(s.Labels, k)
		}
		for _, l := range splitTop(m[4]) {
			l = strings.TrimSuffix(strings.TrimPrefix(l, "c("), ")") // a constrained label
			s.Labels = sortedAdd(s.Labels, l)
		}
	}
	return nil
}

// splitTop splits a descriptor's label list at its commas outside quotes.
func splitTop(s string) []string {
	var out []string
	var cur strings.Builder
	quoted, escaped := false, false
	for _, r := range s {
		switch {
		case escaped:
			escaped = false
		case r == '\\' && quoted:
			escaped = true
		case r == '"':
			quoted = !quoted
		case r == ',' && !quoted:
			out = append(out, cur.String())
			cur.Reset()
			continue
		}
		cur.WriteRune(r)
	}
	if cur.Len() > 0 {
		out = append(out, cur.String())
	}
	return out
}

func sortedAdd(list []string, v string) []string {
	if i, found := slices.BinarySearch(list, v); !found {
		list = slices.Insert(list, i, v)
	}
	return list
}

// registeredSeries registers what run registers on a node of each kind, on
// recorders, through the same functions: the durable-write counters and
// build info of every node, then the edge's and the ingest's series, which
// their servers add as they are built (the caps). It returns the mayfly_*
// series by name: run's Go and process collectors are not registered here
// (their series follow the Go release, and no alert or panel reads them).
func registeredSeries(t testing.TB) map[string]*series {
	t.Helper()
	all := map[string]*series{}
	for _, node := range []string{"edge", "ingest"} {
		rec := &recorder{node: node, series: all}
		store := storage.New(nil, storage.Config{})
		registerWriteStats(rec, store)
		registerBuildInfo(rec, build{version: "v0", revision: "0"}, store.WriteLayout)
		// A custom collector: one reading, so the recorder sees its type.
		rc := newRedisChecker(nil, false, nil)
		rc.gauge = map[[2]string]bool{{"127.0.0.1:6379", "maxmemory-policy"}: true}
		rec.MustRegister(rc)
		switch node {
		case "edge":
			edge.New(store, nil, edge.Config{}, nil, edge.NewMetrics(rec))
		case "ingest":
			ingest.New(store, nil, nil, ingest.Config{}, nil, ingest.NewMetrics(rec))
		}
	}
	for _, s := range all {
		if len(s.Values) == 0 {
			s.Values = nil
		}
	}
	maps.DeleteFunc(all, func(name string, _ *series) bool { return !strings.HasPrefix(name, "mayfly_") })
	return all
}

// deploy/prometheus/series.json is the nodes' registrations as they are:
// the dashboard's and the alerts' checks read it. go test ./cmd/mayfly -run
// TestSeriesFile -update rewrites it.
func TestSeriesFile(t *testing.T) {
	t.Parallel()
	got := registeredSeries(t)
	names := slices.Sorted(maps.Keys(got))
	list := make([]*series, 0, len(names))
	for _, n := range names {
		list = append(list, got[n])
	}
	b, err := json.MarshalIndent(list, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	b = append(b, '\n')
	if *update {
		if err := os.WriteFile(seriesFile, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	file, err := os.ReadFile(seriesFile)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(file, b) {
		t.Errorf("%s is not the nodes' registrations: go test ./cmd/mayfly -run TestSeriesFile -update", filepath.Base(seriesFile))
	}
	// Spot checks that the recorder reads what it should.
	for name, want := range map[string]string{
		"mayfly_http_requests_total":           "counter [route status]",
		"mayfly_http_request_duration_seconds": "histogram [route]",
		"mayfly_durable_writes_total":          "counter [outcome]",
		"mayfly_build_info":                    "gauge [layout revision version]",
		"mayfly_smtp_sessions_max":             "gauge []",
		"mayfly_http_conns_max":                "gauge []",
	} {
		s := got[name]
		if s == nil {
			t.Errorf("%s not registered", name)
			continue
		}
		if got := s.Type + " " + fmt.Sprint(s.Labels); got != want {
			t.Errorf("%s: %s, want %s", name, got, want)
		}
	}
	if got, want := fmt.Sprint(got["mayfly_durable_writes_total"].Values["outcome"]), "[acked_no_wait acked_waited redirected refused]"; got != want {
		t.Errorf("mayfly_durable_writes_total outcomes %s, want %s", got, want)
	}
}

// checkScrapeRegistered fails t for every mayfly_* family of a node's
// /metrics that registeredSeries does not know: a registration run makes
// that the series file misses.
func checkScrapeRegistered(t *testing.T, metrics string) {
	t.Helper()
	known := registeredSeries(t)
	for line := range strings.Lines(metrics) {
		f := strings.Fields(line)
		if len(f) >= 3 && f[0] == "#" && f[1] == "TYPE" && strings.HasPrefix(f[2], "mayfly_") && known[f[2]] == nil {
			t.Errorf("/metrics has %s, which registeredSeries (series_test.go) does not register: deploy/prometheus/series.json misses it", f[2])
		}
	}
}
