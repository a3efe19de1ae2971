package check

import (
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8slabels "k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite the monitoring component's prometheusrule.yaml from deploy/prometheus")

var (
	promDir   = filepath.Join(repo, "deploy", "prometheus")
	dashboard = filepath.Join(repo, "deploy", "grafana", "mayfly.json")
	component = filepath.Join(base, "components", "monitoring")
)

// targetLabels are the labels Prometheus gives every series of a target.
var targetLabels = []string{"instance", "job"}

// otherSeries are the series the rules and the dashboard read that Mayfly
// does not register, with their labels: Prometheus's own up, and
// redis_exporter's (github.com/oliver006/redis_exporter).
var otherSeries = map[string][]string{
	"up":                                    nil,
	"redis_memory_used_bytes":               nil,
	"redis_memory_max_bytes":                nil,
	"redis_evicted_keys_total":              nil,
	"redis_commands_total":                  {"cmd"},
	"redis_commands_duration_seconds_total": {"cmd"},
}

// registered is one entry of deploy/prometheus/series.json, which
// cmd/mayfly's TestSeriesFile writes from the descriptors of every
// collector its nodes register.
type registered struct {
	Name   string              `json:"name"`
	Type   string              `json:"type"`
	Labels []string            `json:"labels"`
	Values map[string][]string `json:"values"`
	Nodes  []string            `json:"nodes"`
	Help   string              `json:"help"`
}

// catalog answers what a query may name: a series and its labels.
type catalog struct {
	series map[string]registered
	parser parser.Parser
}

func loadCatalog(t *testing.T) catalog {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(promDir, "series.json"))
	if err != nil {
		t.Fatal(err)
	}
	var list []registered
	if err := json.Unmarshal(b, &list); err != nil {
		t.Fatalf("series.json: %v", err)
	}
	c := catalog{series: map[string]registered{}, parser: parser.NewParser(parser.Options{})}
	for _, s := range list {
		c.series[s.Name] = s
	}
	if _, ok := c.series["mayfly_durable_writes_total"]; !ok || len(list) < 20 {
		t.Fatalf("series.json lists %d series, not the nodes'", len(list))
	}
	for name, ls := range otherSeries {
		c.series[name] = registered{Name: name, Type: "other", Labels: ls}
	}
	return c
}

// lookup returns the labels series name may carry, target labels
// included, and the values known for its constant labels.
func (c catalog) lookup(name string) ([]string, map[string][]string, bool) {
	s, ok := c.series[name]
	extra := []string{}
	if !ok {
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if h, found := c.series[strings.TrimSuffix(name, suffix)]; found && strings.HasSuffix(name, suffix) &&
				(h.Type == "histogram" || h.Type == "summary") {
				s, ok = h, true
				if suffix == "_bucket" && h.Type == "histogram" {
					extra = append(extra, "le")
				}
			}
		}
	}
	if !ok {
		return nil, nil, false
	}
	return slices.Concat(s.Labels, targetLabels, extra), s.Values, true
}

// labelsUnder is every label the selectors of e may carry.
func (c catalog) labelsUnder(e parser.Node) []string {
	out := slices.Clone(targetLabels)
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			ls, _, _ := c.lookup(selectorName(vs))
			out = append(out, ls...)
		}
		return nil
	})
	slices.Sort(out)
	return slices.Compact(out)
}

func selectorName(vs *parser.VectorSelector) string {
	if vs.Name != "" {
		return vs.Name
	}
	for _, m := range vs.LabelMatchers {
		if m.Name == model.MetricNameLabel && m.Type == labels.MatchEqual {
			return m.Value
		}
	}
	return ""
}

// check parses expr and returns what is wrong with it: a series no node
// registers, a label its series does not carry (in a matcher, a by or an
// on clause), a constant label's value that matches none of its values;
// and, when legend is given, a {{label}} its result cannot carry.
func (c catalog) check(expr string, templated ...string) []string {
	e, err := c.parser.ParseExpr(expr)
	if err != nil {
		return []string{fmt.Sprintf("%q: %v", expr, err)}
	}
	var problems []string
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		switch n := n.(type) {
		case *parser.VectorSelector:
			name := selectorName(n)
			ls, values, ok := c.lookup(name)
			if !ok {
				problems = append(problems, fmt.Sprintf("%s: no node registers it", name))
				return nil
			}
			for _, m := range n.LabelMatchers {
				if m.Name == model.MetricNameLabel {
					continue
				}
				if !slices.Contains(ls, m.Name) {
					problems = append(problems, fmt.Sprintf("%s has no label %s (it has %v)", name, m.Name, ls))
				} else if known := values[m.Name]; len(known) > 0 && !slices.ContainsFunc(known, m.Matches) {
					problems = append(problems, fmt.Sprintf("%s{%s}: matches none of %v", name, m, known))
				}
			}
		case *parser.AggregateExpr:
			under := c.labelsUnder(n.Expr)
			for _, l := range n.Grouping {
				if !slices.Contains(under, l) {
					problems = append(problems, fmt.Sprintf("%s by/without (%s): no series under it has %s (%v)", n.Op, l, l, under))
				}
			}
		case *parser.BinaryExpr:
			if n.VectorMatching != nil {
				under := c.labelsUnder(n)
				for _, l := range slices.Concat(n.VectorMatching.MatchingLabels, n.VectorMatching.Include) {
					if !slices.Contains(under, l) {
						problems = append(problems, fmt.Sprintf("on/ignoring/group (%s): no series has it (%v)", l, under))
					}
				}
			}
		}
		return nil
	})
	under := c.labelsUnder(e)
	for _, text := range templated {
		for _, m := range regexp.MustCompile(`\{\{\s*(?:\$labels\.)?([a-zA-Z_][a-zA-Z0-9_]*)\s*\}\}`).FindAllStringSubmatch(text, -1) {
			if !slices.Contains(under, m[1]) {
				problems = append(problems, fmt.Sprintf("%q names label %s, which %q cannot carry (%v)", text, m[1], expr, under))
			}
		}
	}
	return problems
}

// grafanaVars are Grafana's variables in a query: $__rate_interval and
// the like stand for a range, a dashboard's own for a label value.
var grafanaVars = regexp.MustCompile(`\$\{?(\w+)(?::\w+)?\}?`)

func expandGrafana(q string) string {
	return grafanaVars.ReplaceAllStringFunc(q, func(v string) string {
		if strings.HasPrefix(strings.TrimPrefix(strings.TrimPrefix(v, "$"), "{"), "__") {
			return "5m"
		}
		return "value"
	})
}

type grafanaPanel struct {
	Type       string `json:"type"`
	Title      string `json:"title"`
	Datasource *struct {
		Type string `json:"type"`
		UID  string `json:"uid"`
	} `json:"datasource"`
	Targets []struct {
		Expr         string `json:"expr"`
		LegendFormat string `json:"legendFormat"`
	} `json:"targets"`
	Panels []grafanaPanel `json:"panels"` // a row's
}

// The dashboard is Grafana's JSON, and every query of every panel (and of
// its variables) parses with Prometheus's own parser and names only series
// and labels that the nodes register: series.json, their descriptors,
// so that a vector nothing has observed yet counts.
func TestDashboardQueries(t *testing.T) {
	c := loadCatalog(t)
	b, err := os.ReadFile(dashboard)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Title      string         `json:"title"`
		UID        string         `json:"uid"`
		Panels     []grafanaPanel `json:"panels"`
		Templating struct {
			List []struct {
				Name  string `json:"name"`
				Type  string `json:"type"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("mayfly.json: %v", err)
	}
	if d.Title == "" || d.UID == "" {
		t.Errorf("mayfly.json: title %q, uid %q: want both", d.Title, d.UID)
	}
	named := map[string]bool{}
	note := func(expr string) {
		e, err := c.parser.ParseExpr(expr)
		if err != nil {
			return
		}
		parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
			if vs, ok := n.(*parser.VectorSelector); ok {
				named[strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(selectorName(vs), "_bucket"), "_sum"), "_count")] = true
			}
			return nil
		})
	}
	var queries int
	var walk func(ps []grafanaPanel)
	walk = func(ps []grafanaPanel) {
		for _, p := range ps {
			if p.Type == "row" {
				walk(p.Panels)
				continue
			}
			if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
				t.Errorf("panel %q: datasource %+v, want the dashboard's ${datasource}", p.Title, p.Datasource)
			}
			if len(p.Targets) == 0 {
				t.Errorf("panel %q has no query", p.Title)
			}
			for _, q := range p.Targets {
				queries++
				expr := expandGrafana(q.Expr)
				for _, problem := range c.check(expr, q.LegendFormat) {
					t.Errorf("panel %q: %s", p.Title, problem)
				}
				note(expr)
			}
		}
	}
	walk(d.Panels)
	labelValues := regexp.MustCompile(`^label_values\((?:(.+),\s*)?(\w+)\)$`)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		q, _ := v.Query.(string)
		if m, ok := v.Query.(map[string]any); ok {
			q, _ = m["query"].(string)
		}
		m := labelValues.FindStringSubmatch(q)
		if m == nil {
			t.Errorf("variable %s: query %q, want label_values(series, label)", v.Name, q)
			continue
		}
		if problems := c.check(m[1], "{{"+m[2]+"}}"); len(problems) > 0 {
			t.Errorf("variable %s: %v", v.Name, problems)
		}
	}
	if queries < 20 {
		t.Errorf("%d queries: the dashboard lost its panels", queries)
	}
	// Every series a node registers has a panel.
	for _, name := range slices.Sorted(maps.Keys(c.series)) {
		if c.series[name].Type != "other" && !named[name] {
			t.Errorf("no panel shows %s", name)
		}
	}
}

// ruleFiles parses deploy/prometheus's rule files (not their tests)
// strictly, as Prometheus would load them.
func ruleFiles(t *testing.T, c catalog) map[string]*rulefmt.RuleGroups {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(promDir, "*.yml"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*rulefmt.RuleGroups{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.yml") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		groups, errs := rulefmt.Parse(b, false, model.UTF8Validation, c.parser, slog.New(slog.DiscardHandler))
		if len(errs) > 0 {
			t.Fatalf("%s: %v", f, errs)
		}
		out[filepath.Base(f)] = groups
	}
	if len(out) < 2 {
		t.Fatalf("rule files %v: want alerts.yml and redis-alerts.yml", slices.Collect(maps.Keys(out)))
	}
	return out
}

// Every rule's expression names only registered series and their labels,
// and its annotations only labels its result carries.
func TestRuleQueries(t *testing.T) {
	c := loadCatalog(t)
	for file, groups := range ruleFiles(t, c) {
		for _, g := range groups.Groups {
			for _, r := range g.Rules {
				for _, problem := range c.check(r.Expr, slices.Collect(maps.Values(r.Annotations))...) {
					t.Errorf("%s: %s: %s", file, r.Alert, problem)
				}
			}
		}
	}
}

// prometheusRule is the PrometheusRule that holds groups: what the
// monitoring component's prometheusrule.yaml must be.
func prometheusRule(t *testing.T, files map[string]*rulefmt.RuleGroups) *monitoringv1.PrometheusRule {
	t.Helper()
	pr := &monitoringv1.PrometheusRule{
		TypeMeta: metav1.TypeMeta{APIVersion: "monitoring.coreos.com/v1", Kind: "PrometheusRule"},
		ObjectMeta: metav1.ObjectMeta{Name: "mayfly",
			Labels: map[string]string{"app.kubernetes.io/part-of": "mayfly"}},
	}
	for _, name := range slices.Sorted(maps.Keys(files)) {
		for _, g := range files[name].Groups {
			mg := monitoringv1.RuleGroup{Name: g.Name}
			for _, r := range g.Rules {
				mr := monitoringv1.Rule{Alert: r.Alert, Record: r.Record, Expr: intstr.FromString(r.Expr),
					Labels: r.Labels, Annotations: r.Annotations}
				if r.For != 0 {
					d := monitoringv1.Duration(r.For.String())
					mr.For = &d
				}
				mg.Rules = append(mg.Rules, mr)
			}
			pr.Spec.Groups = append(pr.Spec.Groups, mg)
		}
	}
	return pr
}

// The monitoring component (kube-prometheus, which ignores the pods'
// annotations) decodes strictly into the Prometheus Operator's types; its
// PodMonitor scrapes both Deployments' admin port with the job names the
// alerts expect, and its PrometheusRule is deploy/prometheus's rule files
// (-update rewrites it from them).
func TestMonitoringComponent(t *testing.T) {
	c := loadCatalog(t)
	want := prometheusRule(t, ruleFiles(t, c))
	ruleFile := filepath.Join(component, "prometheusrule.yaml")
	if *update {
		b, err := yaml.Marshal(want)
		if err != nil {
			t.Fatal(err)
		}
		header := "# Generated from deploy/prometheus/alerts.yml and redis-alerts.yml by\n" +
			"# deploy/check (go test -run TestMonitoringComponent -update): edit those.\n"
		if err := os.WriteFile(ruleFile, append([]byte(header), b...), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	b, err := os.ReadFile(filepath.Join(component, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var k struct {
		APIVersion string   `json:"apiVersion"`
		Kind       string   `json:"kind"`
		Resources  []string `json:"resources"`
	}
	if err := yaml.UnmarshalStrict(b, &k); err != nil {
		t.Fatalf("kustomization.yaml: %v", err)
	}
	if k.APIVersion != "kustomize.config.k8s.io/v1alpha1" || k.Kind != "Component" {
		t.Errorf("kustomization.yaml: %s %s, want a kustomize.config.k8s.io/v1alpha1 Component", k.APIVersion, k.Kind)
	}
	var monitors []*monitoringv1.PodMonitor
	var rules []*monitoringv1.PrometheusRule
	for _, res := range k.Resources {
		b, err := os.ReadFile(filepath.Join(component, res))
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(b), -1) {
			if strings.TrimSpace(doc) == "" {
				continue
			}
			var meta metav1.TypeMeta
			if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
				t.Fatalf("%s doc %d: %v", res, i, err)
			}
			var obj any
			switch meta.APIVersion + " " + meta.Kind {
			case "monitoring.coreos.com/v1 PodMonitor":
				pm := &monitoringv1.PodMonitor{}
				monitors, obj = append(monitors, pm), pm
			case "monitoring.coreos.com/v1 PrometheusRule":
				pr := &monitoringv1.PrometheusRule{}
				rules, obj = append(rules, pr), pr
			default:
				t.Fatalf("%s doc %d: unexpected %s %s", res, i, meta.APIVersion, meta.Kind)
			}
			if err := yaml.UnmarshalStrict([]byte(doc), obj); err != nil {
				t.Fatalf("%s doc %d (%s): %v", res, i, meta.Kind, err)
			}
		}
	}
	if len(monitors) != 1 || len(rules) != 1 {
		t.Fatalf("%d PodMonitors and %d PrometheusRules, want one of each", len(monitors), len(rules))
	}

	pm := monitors[0]
	o := load(t, base)
	for _, name := range []string{"mayfly-edge", "mayfly-ingest"} {
		d := o.deployments[name]
		if d == nil {
			t.Fatalf("no Deployment %s", name)
		}
		pod := d.Spec.Template
		sel, err := metav1.LabelSelectorAsSelector(&pm.Spec.Selector)
		if err != nil {
			t.Fatalf("PodMonitor selector: %v", err)
		}
		if !sel.Matches(k8slabels.Set(pod.Labels)) {
			t.Errorf("PodMonitor %s does not select %s's pods %v", pm.Name, name, pod.Labels)
		}
		// The job is the pod's label jobLabel names: the alerts' job names.
		if job := pod.Labels[pm.Spec.JobLabel]; job != name {
			t.Errorf("PodMonitor %s: jobLabel %q gives %s's metrics job %q, want %q (alerts.yml's)", pm.Name, pm.Spec.JobLabel, name, job, name)
		}
		for _, ep := range pm.Spec.PodMetricsEndpoints {
			port := ""
			if ep.Port != nil {
				port = *ep.Port
			}
			found := false
			for _, p := range pod.Spec.Containers[0].Ports {
				found = found || p.Name == port
			}
			if !found || port != "admin" || ep.Path != "/metrics" {
				t.Errorf("PodMonitor %s: endpoint port %q path %q, want %s's admin port and /metrics", pm.Name, port, ep.Path, name)
			}
		}
	}
	if len(pm.Spec.PodMetricsEndpoints) != 1 {
		t.Errorf("PodMonitor %s: %d endpoints, want 1", pm.Name, len(pm.Spec.PodMetricsEndpoints))
	}

	got, err := json.Marshal(rules[0])
	if err != nil {
		t.Fatal(err)
	}
	wantJSON, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(wantJSON) {
		t.Errorf("prometheusrule.yaml is not deploy/prometheus's rules: go test -run TestMonitoringComponent -update")
	}
	n := 0
	for _, g := range rules[0].Spec.Groups {
		n += len(g.Rules)
	}
	if n < 15 {
		t.Errorf("the PrometheusRule holds %d rules", n)
	}
}

// The checker refuses what a renamed metric or a misspelt label would
// leave behind, and passes what the nodes register.
func TestQueryCheck(t *testing.T) {
	c := loadCatalog(t)
	for _, tt := range []struct {
		expr, legend string
		ok           bool
	}{
		{`sum by (route) (rate(mayfly_http_requests_total{status=~"5.."}[5m]))`, "{{route}}", true},
		{`histogram_quantile(0.99, sum by (le) (rate(mayfly_http_request_duration_seconds_bucket[5m])))`, "", true},
		{`rate(mayfly_durable_writes_total{outcome="acked_waited"}[5m])`, "{{instance}}", true},
		{`count by (version, layout) (mayfly_build_info)`, "{{version}}", true},
		{`mayfly_smtp_sessions_max`, "", true},
		{`absent(up{job="mayfly-edge"})`, "{{job}}", true},
		{`rate(mayfly_http_request_total[5m])`, "", false},                         // misspelt name
		{`rate(mayfly_http_requests_total{code="500"}[5m])`, "", false},            // no such label
		{`rate(mayfly_durable_writes_total{outcome="acked_wait"}[5m])`, "", false}, // no such outcome
		{`rate(mayfly_durable_writes_total{outcome=~"acked_.*"}[5m])`, "", true},   // a regexp matching some
		{`sum by (reason) (rate(mayfly_smtp_messages_total[5m]))`, "", false},      // result, not reason
		{`sum by (result) (rate(mayfly_smtp_messages_total[5m]))`, "{{reason}}", false},
		{`rate(mayfly_http_requests_total_bucket[5m])`, "", false},               // a counter has no buckets
		{`mayfly_smtp_stage_duration_seconds_count{le="1"}`, "", false},          // le is the buckets'
		{`mayfly_http_conns_open / on (route) mayfly_http_conns_max`, "", false}, // neither has route
		{`sum(rate(mayfly_http_requests_total[5m])`, "", false},                  // does not parse
	} {
		problems := c.check(tt.expr, tt.legend)
		if got := len(problems) == 0; got != tt.ok {
			t.Errorf("check(%s, %q) = %v, want ok %v", tt.expr, tt.legend, problems, tt.ok)
		}
	}
}

// The Prometheus queries of deploy/RUNBOOKS.md (curl … --data-urlencode
// 'query=…') name only registered series and labels, like the
// dashboard's, and their jq filters only labels the result carries.
func TestRunbookQueries(t *testing.T) {
	c := loadCatalog(t)
	b, err := os.ReadFile(filepath.Join(repo, "deploy", "RUNBOOKS.md"))
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`--data-urlencode 'query=([^']+)'(.*)`)
	matches := re.FindAllStringSubmatch(string(b), -1)
	if len(matches) < 5 {
		t.Fatalf("%d queries in RUNBOOKS.md", len(matches))
	}
	for _, m := range matches {
		var jq []string
		for _, l := range regexp.MustCompile(`\.metric\.(\w+)`).FindAllStringSubmatch(m[2], -1) {
			jq = append(jq, "{{"+l[1]+"}}")
		}
		for _, problem := range c.check(m[1], jq...) {
			t.Errorf("RUNBOOKS.md: %s", problem)
		}
	}
}
