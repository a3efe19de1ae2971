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
