package smtp_test

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-smtp"
)

// A message of exactly MaxMessageBytes (what SIZE advertises) is accepted;
// one byte more is refused.
func TestServer_exactlyMaxMessageBytes(t *testing.T) {
	for _, tc := range []struct {
		size int
		want string
	}{{50, "250 "}, {51, "552 "}} {
		be, s, c, scanner := testServerAuthenticated(t, func(s *smtp.Server) { s.MaxMessageBytes = 50 })
		io.WriteString(c, "MAIL FROM:<root@nsa.gov>\r\nRCPT TO:<root@gchq.gov.uk>\r\nDATA\r\n")
		for i := 0; i < 3; i++ {
			scanner.Scan()
		}
		io.WriteString(c, strings.Repeat("x", tc.size-2)+"\r\n.\r\n")
		scanner.Scan()
		if !strings.HasPrefix(scanner.Text(), tc.want) {
			t.Errorf("message of %d bytes: DATA response %q, want %q", tc.size, scanner.Text(), tc.want)
		}
		if got, want := len(be.messages), map[bool]int{true: 1}[tc.want == "250 "]; got != want {
			t.Errorf("message of %d bytes: %d messages stored, want %d", tc.size, got, want)
		}
		s.Close()
	}
}

// smuggle is the rest of a stalled message holding a second transaction.
const smuggle = "\r\nRSET\r\nMAIL FROM:<root@nsa.gov>\r\nRCPT TO:<victim@gchq.gov.uk>\r\nDATA\r\nsmuggled\r\n.\r\n"

// A refused DATA whose drain runs out of time closes the connection with
// 421: the rest of the message is never read as commands.
func TestServer_dataDrainTimeoutCloses(t *testing.T) {
	be, s, c, scanner := testServerAuthenticated(t, func(s *smtp.Server) {
		s.MaxMessageBytes = 50
		s.ReadTimeout = 300 * time.Millisecond
	})
	defer s.Close()
	io.WriteString(c, "MAIL FROM:<root@nsa.gov>\r\nRCPT TO:<root@gchq.gov.uk>\r\nDATA\r\n")
	for i := 0; i < 3; i++ {
		scanner.Scan()
	}
	io.WriteString(c, strings.Repeat("x", 100)+"\r\n")
	time.Sleep(600 * time.Millisecond)
	io.WriteString(c, smuggle)
	var replies []string
	for scanner.Scan() {
		replies = append(replies, scanner.Text())
	}
	if len(replies) != 1 || !strings.HasPrefix(replies[0], "421 4.4.2") {
		t.Errorf("replies %q, want one 421 4.4.2 and the connection closed", replies)
	}
	if len(be.messages) != 0 {
		t.Errorf("%d messages stored, want 0", len(be.messages))
	}
}

// A refused BDAT chunk that does not arrive whole before the deadline ends
// the connection the same way.
func TestServer_bdatDiscardTimeoutCloses(t *testing.T) {
	be, s, c, scanner := testServerAuthenticated(t, func(s *smtp.Server) {
		s.MaxMessageBytes = 50
		s.ReadTimeout = 300 * time.Millisecond
	})
	defer s.Close()
	io.WriteString(c, "MAIL FROM:<root@nsa.gov>\r\nRCPT TO:<root@gchq.gov.uk>\r\nBDAT 1000 LAST\r\n"+strings.Repeat("x", 100))
	for i := 0; i < 3; i++ {
		scanner.Scan()
	}
	if !strings.HasPrefix(scanner.Text(), "552 ") {
		t.Fatalf("BDAT response %q, want 552", scanner.Text())
	}
	time.Sleep(450 * time.Millisecond) // past the deadline, before the next one
	io.WriteString(c, smuggle)
	var replies []string
	for scanner.Scan() {
		replies = append(replies, scanner.Text())
	}
	if len(replies) != 1 || !strings.HasPrefix(replies[0], "421 4.4.2") {
		t.Errorf("replies %q, want one 421 4.4.2 and the connection closed", replies)
	}
	if len(be.messages) != 0 {
		t.Errorf("%d messages stored, want 0", len(be.messages))
	}
}
