package client_test

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"testing"

	client "github.com/mayfly/mayfly/clients/go"
)

// The cases of Code, Codes, Links and LinksWithText are shared with the
// TypeScript and Python clients' unit tests (clients/testdata), so the three
// cannot drift apart.

type helperMessage struct {
	Subject  string `json:"subject"`
	TextBody string `json:"text_body"`
	HTMLBody string `json:"html_body"`
}

func (m helperMessage) message() client.Message {
	return client.Message{MessageSummary: client.MessageSummary{Subject: m.Subject}, TextBody: m.TextBody, HTMLBody: m.HTMLBody}
}

func readCases[T any](t *testing.T, name string) []T {
	t.Helper()
	b, err := os.ReadFile("../testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	var file struct{ Cases []T }
	if err := json.Unmarshal(b, &file); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if len(file.Cases) == 0 {
		t.Fatalf("%s has no cases", name)
	}
	return file.Cases
}

func TestCodeTable(t *testing.T) {
	type codeCase struct {
		Name    string
		Message helperMessage
		Pattern *string
		Code    *string
		Codes   []string
	}
	for _, tc := range readCases[codeCase](t, "codes.json") {
		t.Run(tc.Name, func(t *testing.T) {
			var pattern *regexp.Regexp
			if tc.Pattern != nil {
				pattern = regexp.MustCompile(*tc.Pattern)
			}
			want, wantOK := "", tc.Code != nil
			if wantOK {
				want = *tc.Code
			}
			if got, ok := client.Code(tc.Message.message(), pattern); got != want || ok != wantOK {
				t.Errorf("Code = %q, %v; want %q, %v", got, ok, want, wantOK)
			}
			if tc.Pattern != nil {
				return
			}
			if got := client.Codes(tc.Message.message()); !slices.Equal(got, tc.Codes) || got == nil && tc.Codes == nil {
				t.Errorf("Codes = %q; want %q", got, tc.Codes)
			}
		})
	}
}

func TestLinksTable(t *testing.T) {
	type linksCase struct {
		Name          string
		Message       helperMessage
		LinksWithText []client.Link `json:"links_with_text"`
	}
	for _, tc := range readCases[linksCase](t, "links.json") {
		t.Run(tc.Name, func(t *testing.T) {
			got := client.LinksWithText(tc.Message.message())
			if !slices.Equal(got, tc.LinksWithText) {
				t.Errorf("LinksWithText = %q\nwant %q", got, tc.LinksWithText)
			}
			var urls []string
			for _, l := range tc.LinksWithText {
				urls = append(urls, l.URL)
			}
			if got := client.Links(tc.Message.message()); !slices.Equal(got, urls) {
				t.Errorf("Links = %q\nwant %q", got, urls)
			}
		})
	}
}
