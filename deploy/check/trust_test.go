package check

import (
	"fmt"
	"net/netip"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
)

// placeholder stands in the base for the load balancer's addresses, in the
// trust settings and in the NetworkPolicies' ipBlocks. It is not a CIDR:
// the node refuses the settings ("is not a CIDR") and the API server the
// policies until an overlay replaces it.
const placeholder = "REPLACE-WITH-LOAD-BALANCER-CIDR"

// trusted are the settings that trust peers of a port: a trusted peer
// claims any client address (X-Forwarded-For, a PROXY header) and is exempt
// from the per-IP and per-network connection caps.
var trusted = []struct{ deployment, port, setting string }{
	{"mayfly-edge", "http", "MAYFLY_TRUSTED_PROXIES"},
	{"mayfly-ingest", "smtp", "MAYFLY_SMTP_PROXY_PROTOCOL_FROM"},
}

// checkTrust returns why the trust settings of the ConfigMap mayfly-config
// do not match the NetworkPolicies: each trusted range must lie inside the
// ipBlocks the policies admit to the port, and no rule may admit the port
// from every source while anything is trusted. Otherwise a peer the policy
// lets in, another pod or any host, could claim any client address. Peers
// admitted by pod or namespace selector are allowed beside (an in-cluster
// sender), but their addresses are unknown, so they never cover a trusted
// range. Base placeholders not yet replaced are reported too.
func checkTrust(o objects) []string {
	var out []string
	cm := o.configMaps["mayfly-config"]
	if cm == nil {
		return []string{"no ConfigMap mayfly-config"}
	}
	for _, tr := range trusted {
		d := o.deployments[tr.deployment]
		if d == nil {
			out = append(out, "no Deployment "+tr.deployment)
			continue
		}
		var blocks []networkingv1.IPBlock
		var everyone []string // policies admitting the port from every source
		for _, np := range o.policies {
			if !matches(np.Spec.PodSelector.MatchLabels, d.Spec.Template.Labels) {
				continue
			}
			for _, rule := range np.Spec.Ingress {
				if !admitsPort(rule, tr.port, d.Spec.Template.Spec.Containers) {
					continue
				}
				if len(rule.From) == 0 {
					everyone = append(everyone, np.Name)
				}
				for _, peer := range rule.From {
					if b := peer.IPBlock; b != nil {
						if b.CIDR == placeholder {
							out = append(out, fmt.Sprintf("NetworkPolicy %s: the ipBlock admitting port %s is the base's placeholder %q: set the load balancer's CIDR in the overlay",
								np.Name, tr.port, placeholder))
							continue
						}
						blocks = append(blocks, *b)
					}
				}
			}
		}
		trust, errs := trustRanges(tr.setting, cm.Data[tr.setting])
		out = append(out, errs...)
		if len(trust) == 0 {
			continue
		}
		for _, name := range everyone {
			out = append(out, fmt.Sprintf("NetworkPolicy %s admits port %s from every source while %s trusts %s: any pod or host that reaches the port can claim any client address; admit the port only from the load balancer (an ipBlock) and trust only that",
				name, tr.port, tr.setting, cm.Data[tr.setting]))
		}
		for _, p := range trust {
			if !covered(p, blocks) {
				out = append(out, fmt.Sprintf("%s trusts %s, wider than the sources the NetworkPolicies admit to port %s (%s): trust only the load balancer, inside those ipBlocks",
					tr.setting, p, tr.port, describe(blocks)))
			}
		}
	}
	return out
}

// trustRanges parses a trust setting the way the node does (cmd/mayfly:
// comma-separated CIDRs or bare addresses, empty items skipped).
func trustRanges(setting, v string) ([]netip.Prefix, []string) {
	var out []netip.Prefix
	var errs []string
	for item := range strings.SplitSeq(v, ",") {
		item = strings.TrimSpace(item)
		switch {
		case item == "":
			continue
		case item == placeholder:
			errs = append(errs, fmt.Sprintf("%s is the base's placeholder %q: set the load balancer's CIDRs in the overlay (the node refuses to start with it)", setting, placeholder))
			continue
		}
		p, err := netip.ParsePrefix(item)
		if err != nil {
			a, aerr := netip.ParseAddr(item)
			if aerr != nil {
				errs = append(errs, fmt.Sprintf("%s: %q is not a CIDR", setting, item))
				continue
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		out = append(out, p.Masked())
	}
	return out, errs
}

// admitsPort reports whether rule admits the named port of containers (a
// rule without ports admits them all).
func admitsPort(rule networkingv1.NetworkPolicyIngressRule, name string, containers []corev1.Container) bool {
	if len(rule.Ports) == 0 {
		return true
	}
	number := -1
	for _, c := range containers {
		for _, p := range c.Ports {
			if p.Name == name {
				number = int(p.ContainerPort)
			}
		}
	}
	for _, p := range rule.Ports {
		if p.Port == nil || p.Port.String() == name || p.Port.IntValue() == number {
			return true
		}
	}
	return false
}

// covered reports whether every address of p lies in one of blocks (an
// ipBlock's CIDR less its excepts); several blocks may share the work.
func covered(p netip.Prefix, blocks []networkingv1.IPBlock) bool {
	overlaps := false
	for _, b := range blocks {
		cidr, err := netip.ParsePrefix(b.CIDR)
		if err != nil || !cidr.Overlaps(p) {
			continue
		}
		overlaps = true
		if cidr.Bits() > p.Bits() {
			continue
		}
		excepted := false
		for _, e := range b.Except {
			if ep, err := netip.ParsePrefix(e); err != nil || ep.Overlaps(p) {
				excepted = true
			}
		}
		if !excepted {
			return true
		}
	}
	if !overlaps || p.Bits() == p.Addr().BitLen() {
		return false
	}
	lo, hi := halves(p)
	return covered(lo, blocks) && covered(hi, blocks)
}

// halves splits a masked prefix into its two halves.
func halves(p netip.Prefix) (netip.Prefix, netip.Prefix) {
	bits := p.Bits() + 1
	a := p.Addr().AsSlice()
	a[(bits-1)/8] |= 0x80 >> ((bits - 1) % 8)
	hi, _ := netip.AddrFromSlice(a)
	return netip.PrefixFrom(p.Addr(), bits), netip.PrefixFrom(hi, bits)
}

func describe(blocks []networkingv1.IPBlock) string {
	if len(blocks) == 0 {
		return "no ipBlock"
	}
	var s []string
	for _, b := range blocks {
		if len(b.Except) > 0 {
			s = append(s, b.CIDR+" except "+strings.Join(b.Except, " "))
		} else {
			s = append(s, b.CIDR)
		}
	}
	return strings.Join(s, ", ")
}

// TestTrustBaseAsShipped: the base trusts no address until an overlay
// names its load balancer, in the settings and in the NetworkPolicies
// alike; until then every one of the four places is reported, and the
// placeholder is no CIDR, so neither the node nor the API server would
// take it.
func TestTrustBaseAsShipped(t *testing.T) {
	o := load(t, base)
	for _, tr := range trusted {
		if got := o.configMaps["mayfly-config"].Data[tr.setting]; got != placeholder {
			t.Errorf("ConfigMap %s = %q, want the placeholder %q", tr.setting, got, placeholder)
		}
	}
	got := checkTrust(o)
	if len(got) != 4 {
		t.Errorf("checkTrust(base) = %d findings, want the 4 placeholders:\n%s", len(got), strings.Join(got, "\n"))
	}
	for _, msg := range got {
		if !strings.Contains(msg, "placeholder") {
			t.Errorf("unexpected finding on the base: %s", msg)
		}
	}
	// The node's parser (cmd/mayfly, parser.prefixes) and the API server's
	// both refuse it.
	if _, err := netip.ParsePrefix(placeholder); err == nil {
		t.Error("the placeholder parses as a CIDR")
	}
	if _, err := netip.ParseAddr(placeholder); err == nil {
		t.Error("the placeholder parses as an address")
	}
}

// TestTrustRendered checks an overlay: MAYFLY_K8S_RENDERED names the
// output of `kubectl kustomize <overlay>`, whose objects keep the base's
// names (TestProductionOverlay renders deploy/k8s-production itself). Run
// it as
//
//	kubectl kustomize overlays/prod > /tmp/prod.yaml
//	cd deploy/check && MAYFLY_K8S_RENDERED=/tmp/prod.yaml go test -run TestTrustRendered .
func TestTrustRendered(t *testing.T) {
	path := os.Getenv("MAYFLY_K8S_RENDERED")
	if path == "" {
		t.Skip("MAYFLY_K8S_RENDERED is not set: no overlay to check")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	o := newObjects()
	o.decode(t, path, b, true)
	for _, msg := range checkTrust(o) {
		t.Error(msg)
	}
}

// TestTrustRanges fills the base's placeholders as an overlay would and
// checks what deploy/check accepts.
func TestTrustRanges(t *testing.T) {
	lb := func(cidrs ...string) []networkingv1.NetworkPolicyPeer {
		var out []networkingv1.NetworkPolicyPeer
		for _, c := range cidrs {
			cidr, except, _ := strings.Cut(c, " except ")
			b := &networkingv1.IPBlock{CIDR: cidr}
			if except != "" {
				b.Except = strings.Split(except, " ")
			}
			out = append(out, networkingv1.NetworkPolicyPeer{IPBlock: b})
		}
		return out
	}
	tests := []struct {
		name       string
		http, smtp string                           // the trust settings
		from       []networkingv1.NetworkPolicyPeer // the peers admitted to http and smtp; none: every source
		selector   bool                             // one more peer, chosen by pod selector (an in-cluster sender)
		want       []string                         // in the findings, one each; none: accepted
	}{
		{name: "matching", http: "10.20.0.0/24", smtp: "10.20.0.0/24", from: lb("10.20.0.0/24")},
		{name: "one address, as the node takes it", http: "10.20.0.7", smtp: "10.20.0.7/32", from: lb("10.20.0.0/24")},
		{name: "inside two blocks together", http: "10.20.0.0/23", smtp: "10.20.1.0/24", from: lb("10.20.0.0/24", "10.20.1.0/24")},
		{name: "IPv6", http: "2001:db8:1::/64", smtp: "2001:db8:1::5", from: lb("2001:db8:1::/56")},
		{name: "an in-cluster sender by selector beside", http: "10.20.0.0/24", smtp: "10.20.0.0/24", from: lb("10.20.0.0/24"), selector: true},
		{name: "nothing trusted: both ports open to every source (no proxy in front)", http: "", smtp: ""},
		{name: "too wide", http: "10.0.0.0/8", smtp: "10.20.0.0/24", from: lb("10.20.0.0/24"),
			want: []string{"MAYFLY_TRUSTED_PROXIES trusts 10.0.0.0/8, wider than the sources the NetworkPolicies admit to port http (10.20.0.0/24)"}},
		{name: "partly outside", http: "10.20.0.0/24", smtp: "10.20.0.0/23", from: lb("10.20.0.0/24"),
			want: []string{"MAYFLY_SMTP_PROXY_PROTOCOL_FROM trusts 10.20.0.0/23, wider than"}},
		{name: "excepted", http: "10.20.0.0/16", smtp: "10.20.9.0/24", from: lb("10.20.0.0/16 except 10.20.9.0/24"),
			want: []string{"MAYFLY_TRUSTED_PROXIES trusts 10.20.0.0/16, wider", "MAYFLY_SMTP_PROXY_PROTOCOL_FROM trusts 10.20.9.0/24, wider"}},
		{name: "other family", http: "10.20.0.0/24", smtp: "2001:db8::/64", from: lb("10.20.0.0/24"),
			want: []string{"MAYFLY_SMTP_PROXY_PROTOCOL_FROM trusts 2001:db8::/64, wider"}},
		{name: "trust without an ipBlock: a selector's addresses are unknown", http: "10.20.0.0/24", smtp: "10.20.0.0/24",
			selector: true,
			want: []string{"MAYFLY_TRUSTED_PROXIES trusts 10.20.0.0/24, wider than the sources the NetworkPolicies admit to port http (no ipBlock)",
				"MAYFLY_SMTP_PROXY_PROTOCOL_FROM trusts 10.20.0.0/24, wider than the sources the NetworkPolicies admit to port smtp (no ipBlock)"}},
		{name: "the old base: the pod network trusted, the ports open to every source", http: "10.0.0.0/8", smtp: "10.0.0.0/8",
			want: []string{"NetworkPolicy mayfly-edge admits port http from every source while MAYFLY_TRUSTED_PROXIES trusts 10.0.0.0/8",
				"NetworkPolicy mayfly-ingest admits port smtp from every source while MAYFLY_SMTP_PROXY_PROTOCOL_FROM trusts 10.0.0.0/8",
				"MAYFLY_TRUSTED_PROXIES trusts 10.0.0.0/8, wider", "MAYFLY_SMTP_PROXY_PROTOCOL_FROM trusts 10.0.0.0/8, wider"}},
		{name: "placeholder left in a setting", http: placeholder, smtp: "10.20.0.0/24", from: lb("10.20.0.0/24"),
			want: []string{`MAYFLY_TRUSTED_PROXIES is the base's placeholder "REPLACE-WITH-LOAD-BALANCER-CIDR"`}},
		{name: "not a CIDR", http: "10.20.0.0/24, lb.example", smtp: "10.20.0.0/24", from: lb("10.20.0.0/24"),
			want: []string{`MAYFLY_TRUSTED_PROXIES: "lb.example" is not a CIDR`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := load(t, base)
			cm := o.configMaps["mayfly-config"]
			cm.Data["MAYFLY_TRUSTED_PROXIES"], cm.Data["MAYFLY_SMTP_PROXY_PROTOCOL_FROM"] = tt.http, tt.smtp
			for _, tr := range trusted {
				rule := publicRule(t, o, tr.deployment, tr.port)
				rule.From = append([]networkingv1.NetworkPolicyPeer(nil), tt.from...)
				if tt.selector {
					rule.From = append(rule.From, selectorPeer(t, o))
				}
			}
			got := checkTrust(o)
			for _, want := range tt.want {
				n := 0
				for _, msg := range got {
					if strings.Contains(msg, want) {
						n++
					}
				}
				if n != 1 {
					t.Errorf("findings hold %q %d times, want once", want, n)
				}
			}
			if len(got) != len(tt.want) {
				t.Errorf("%d findings, want %d:\n%s", len(got), len(tt.want), strings.Join(got, "\n"))
			}
		})
	}
}

// publicRule returns the base's ingress rule admitting port of
// deployment's pods, to be edited in place.
func publicRule(t *testing.T, o objects, deployment, port string) *networkingv1.NetworkPolicyIngressRule {
	t.Helper()
	d := o.deployments[deployment]
	for _, np := range o.policies {
		if !matches(np.Spec.PodSelector.MatchLabels, d.Spec.Template.Labels) {
			continue
		}
		for i, rule := range np.Spec.Ingress {
			if len(rule.Ports) > 0 && admitsPort(rule, port, d.Spec.Template.Spec.Containers) {
				return &np.Spec.Ingress[i]
			}
		}
	}
	t.Fatalf("no NetworkPolicy rule admits %s's port %s", deployment, port)
	return nil
}

// selectorPeer returns a peer chosen by pod selector: the base's Prometheus.
func selectorPeer(t *testing.T, o objects) networkingv1.NetworkPolicyPeer {
	t.Helper()
	for _, np := range o.policies {
		for _, rule := range np.Spec.Ingress {
			for _, peer := range rule.From {
				if peer.PodSelector != nil {
					return peer
				}
			}
		}
	}
	t.Fatal("no peer chosen by pod selector in the base")
	return networkingv1.NetworkPolicyPeer{}
}
