package client_test

import (
	"regexp"
	"slices"
	"testing"

	client "github.com/mayfly/mayfly/clients/go"
)

func TestLinks(t *testing.T) {
	msg := client.Message{
		TextBody: "Confirm: https://shop.example/confirm?a=1&b=2. Or (see https://shop.example/help).\nhttp://x.example/p",
		HTMLBody: `<a href="https://shop.example/confirm?a=1&amp;b=2">go</a> <a href='https://t.example/c?u=1&amp;v=%20'>x</a>` +
			`<a href=mailto:a@b.example>m</a><a HREF="HTTPS://up.example/">u</a>`,
	}
	got := client.Links(msg)
	want := []string{"https://shop.example/confirm?a=1&b=2", "https://shop.example/help", "http://x.example/p",
		"https://t.example/c?u=1&v=%20", "HTTPS://up.example/"}
	if !slices.Equal(got, want) {
		t.Fatalf("Links = %q\nwant %q", got, want)
	}
	if got := client.Links(client.Message{}); len(got) != 0 {
		t.Fatalf("Links of an empty message = %q", got)
	}
}

func TestCode(t *testing.T) {
	for _, tc := range []struct {
		name    string
		msg     client.Message
		pattern *regexp.Regexp
		want    string
		ok      bool
	}{
		{"text", client.Message{TextBody: "Your code is 482913.", HTMLBody: "<p>111111</p>", MessageSummary: client.MessageSummary{Subject: "222222"}}, nil, "482913", true},
		{"word boundaries", client.Message{TextBody: "order 123456789 and 12 then 4321"}, nil, "4321", true},
		{"html text", client.Message{HTMLBody: `<p style="x:1234">Code: <b>7&#55;07</b></p>`}, nil, "7707", true},
		{"subject", client.Message{TextBody: "see subject", MessageSummary: client.MessageSummary{Subject: "Your code 5555"}}, nil, "5555", true},
		{"none", client.Message{TextBody: "no digits", MessageSummary: client.MessageSummary{Subject: "hi"}}, nil, "", false},
		{"custom group", client.Message{TextBody: "token: AB-12CD, code 9999"}, regexp.MustCompile(`token: ([A-Z0-9-]+)`), "AB-12CD", true},
		{"custom whole", client.Message{TextBody: "ref XK42Q"}, regexp.MustCompile(`X[A-Z0-9]{4}`), "XK42Q", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := client.Code(tc.msg, tc.pattern)
			if got != tc.want || ok != tc.ok {
				t.Fatalf("Code = %q, %v; want %q, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestLinksWithText(t *testing.T) {
	msg := client.Message{
		TextBody: "Or paste https://shop.example/verify?u=1&t=2 in your browser.",
		HTMLBody: `<p><a class="btn" href="https://shop.example/verify?u=1&amp;t=2">Verify <b>now</b></a></p>` +
			`<a href="https://shop.example/help?x=1&amp;amp;y">Help &amp;
			 support</a><a href=https://open.example/>` + `<area href="https://map.example/">`,
	}
	got := client.LinksWithText(msg)
	want := []client.Link{
		{URL: "https://shop.example/verify?u=1&t=2", Text: ""}, // first seen in the text
		{URL: "https://shop.example/help?x=1&amp;y", Text: "Help & support"},
		{URL: "https://open.example/", Text: ""},
		{URL: "https://map.example/", Text: ""},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("LinksWithText = %q\nwant %q", got, want)
	}
	html := client.Message{HTMLBody: `<a href="https://shop.example/v?a=1&amp;b=2">Verify</a>`}
	if got := client.LinksWithText(html); len(got) != 1 || got[0].Text != "Verify" || got[0].URL != "https://shop.example/v?a=1&b=2" {
		t.Fatalf("LinksWithText of one anchor = %q", got)
	}
}

func TestCodePrefersKeyword(t *testing.T) {
	for _, tc := range []struct{ text, want string }{
		{"Order #2026 placed 2026-11-24 at 10:00. Your verification code is 482913. Thanks!", "482913"},
		{"Order #2026 placed 2026-11-24. Your PIN: 5590 (ref 123456)", "5590"},
		{"482913 is your one-time code. Order 2026.", "482913"},
		{"Invoice 2026, amount 1234, ref 998877 then 112233 and 4455", "112233"}, // the last 6-digit run
		{"Invoice 2026, amount 1234", "2026"},                                    // else the first run
		{"OTP\n\n  77881", "77881"},
	} {
		if got, ok := client.Code(client.Message{TextBody: tc.text}, nil); !ok || got != tc.want {
			t.Errorf("Code(%q) = %q, %v; want %q", tc.text, got, ok, tc.want)
		}
	}
	msg := client.Message{TextBody: "Order #2026 placed 2026-11-24. Your verification code is 482913"}
	if got := client.Codes(msg); !slices.Equal(got, []string{"2026", "2026", "482913"}) {
		t.Errorf("Codes = %q", got)
	}
	// A custom pattern keeps the first match.
	if got, _ := client.Code(msg, regexp.MustCompile(`\d{4}`)); got != "2026" {
		t.Errorf("Code with a pattern = %q, want the first match 2026", got)
	}
}
