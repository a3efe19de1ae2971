package ingest_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mayfly/mayfly/ingest"
)

// transcript reads every reply line the server writes until it closes the
// connection or within is over, and returns them.
func transcript(c net.Conn, r *bufio.Reader, within time.Duration) []string {
	_ = c.SetReadDeadline(time.Now().Add(within))
	var lines []string
	for {
		line, err := r.ReadString('\n')
		if line = strings.TrimRight(line, "\r\n"); line != "" {
			lines = append(lines, line)
		}
		if err != nil {
			return lines
		}
	}
}

// smuggled is the rest of a stalled message that holds a whole second
// transaction to victim: after a refused DATA whose drain ran out of time,
// go-smtp used to read it as commands.
func smuggled(victim string) string {
	return "\r\nRSET\r\nMAIL FROM:<attacker@example.org>\r\nRCPT TO:<" + victim + ">\r\nDATA\r\n" +
		"From: <attacker@example.org>\r\nSubject: smuggled\r\n\r\nnot from the sender you think\r\n.\r\nQUIT\r\n"
}

// smuggleAfter opens a transaction to mailbox A, has send refuse and stall
// its message, then sends the rest: a second transaction to mailbox B. It
// checks that B received nothing, A nothing, and that the server's only
// reply to the rest was 421 4.4.2 before it closed.
func smuggleAfter(t *testing.T, h *smtpHarness, stall time.Duration, send func(c net.Conn, r *bufio.Reader)) {
	t.Helper()
	a, acred := h.mailbox(t, 10*time.Minute)
	b, bcred := h.mailbox(t, 10*time.Minute)
	c, r, _ := dialGreeting(t, h.addr)
	for _, cmd := range []string{"EHLO client.example.org", "MAIL FROM:<s@example.org>", "RCPT TO:<" + a.Address + ">"} {
		io.WriteString(c, cmd+"\r\n")
		assertReply(t, c, r, "250")
	}
	send(c, r)
	time.Sleep(stall)
	io.WriteString(c, smuggled(b.Address)) // may fail: the server may have closed
	lines := transcript(c, r, 10*time.Second)

	if got := len(h.messages(t, b, bcred)); got != 0 {
		t.Errorf("mailbox B holds %d messages, want 0 (smuggled); server wrote %q", got, lines)
	}
	if got := len(h.messages(t, a, acred)); got != 0 {
		t.Errorf("mailbox A holds %d messages, want 0", got)
	}
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "421 4.4.2") {
		t.Errorf("after the stall the server wrote %q, want one 421 4.4.2 and the connection closed", lines)
	}
	assertNoInternalText(t, strings.Join(lines, "\n"))
}

// TestSMTPNoSmugglingAfterRefusedData is issue 26's reproduction: a DATA
// refused before its end (552 here) is drained up to the terminator; when
// the drain runs out of time (the sender stalled past DataTimeout), the
// rest of the body must not be read as commands. The server answers 421
// and closes, and the second mailbox receives nothing.
func TestSMTPNoSmugglingAfterRefusedData(t *testing.T) {
	t.Parallel()
	h := newSMTPHarness(t, ingest.Config{MaxMessageBytes: 20000, DataTimeout: 3 * time.Second})
	smuggleAfter(t, h, 4500*time.Millisecond, func(c net.Conn, r *bufio.Reader) {
		io.WriteString(c, "DATA\r\n")
		assertReply(t, c, r, "354")
		io.WriteString(c, "Subject: big\r\n\r\n"+strings.Repeat(strings.Repeat("x", 98)+"\r\n", 300)) // 30 KB
	})
}

// TestSMTPNoSmugglingAfterRefusedBDAT: a refused BDAT chunk is discarded
// up to its declared size; when the discard runs out of time, the rest of
// the chunk must not be read as commands either.
func TestSMTPNoSmugglingAfterRefusedBDAT(t *testing.T) {
	t.Parallel()
	h := newSMTPHarness(t, ingest.Config{MaxMessageBytes: 20000, ReadTimeout: time.Second})
	smuggleAfter(t, h, 1500*time.Millisecond, func(c net.Conn, r *bufio.Reader) {
		io.WriteString(c, "BDAT 30000 LAST\r\n"+strings.Repeat("x", 10000))
		assertReply(t, c, r, "552 5.3.4")
	})
}

// TestSMTPBDATTransferTimeout: DataTimeout bounds a whole BDAT transfer,
// not each chunk. A transfer of small chunks that goes on past it gets
// 421 4.4.2 and the connection closes, every time (before, each chunk got
// 250 and the last one 250 or 451 at random, as the parse-slot wait raced
// its expired timer).
func TestSMTPBDATTransferTimeout(t *testing.T) {
	t.Parallel()
	h := newSMTPHarness(t, ingest.Config{DataTimeout: time.Second})
	m, cred := h.mailbox(t, 10*time.Minute)
	const runs = 4
	var wg sync.WaitGroup
	for i := range runs {
		wg.Go(func() {
			c, err := net.Dial("tcp", h.addr)
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			r := bufio.NewReader(c)
			io.WriteString(c, "EHLO client.example.org\r\nMAIL FROM:<s@example.org>\r\nRCPT TO:<"+m.Address+">\r\n")
			head := fmt.Sprintf("Subject: chunked %d\r\n\r\n", i)
			io.WriteString(c, "BDAT "+strconv.Itoa(len(head))+"\r\n"+head)
			start := time.Now()
			for time.Since(start) < 2500*time.Millisecond {
				time.Sleep(250 * time.Millisecond)
				if _, err := io.WriteString(c, "BDAT 10\r\n0123456789"); err != nil {
					break
				}
			}
			io.WriteString(c, "BDAT 0 LAST\r\n")
			lines := transcript(c, r, 5*time.Second)
			if len(lines) == 0 || !strings.HasPrefix(lines[len(lines)-1], "421 4.4.2") {
				t.Errorf("run %d: the transfer that outlived DataTimeout ended with %q, want 421 4.4.2 and close", i, lines[max(0, len(lines)-3):])
			}
			for _, l := range lines {
				if strings.HasPrefix(l, "451") {
					t.Errorf("run %d: got %q", i, l)
				}
			}
		})
	}
	wg.Wait()
	if got := len(h.messages(t, m, cred)); got != 0 {
		t.Errorf("mailbox holds %d messages, want 0", got)
	}
}

// exactly builds a message of exactly n bytes as SIZE counts them (every
// byte before the terminator line, the last CRLF included), as its header
// and its body; each ends with CRLF.
func exactly(n int) (head, body string) {
	head = "Subject: exactly " + strconv.Itoa(n) + "\r\n\r\n"
	return head, strings.Repeat("y", n-len(head)-2) + "\r\n"
}

// TestSMTPSizeEdges: SIZE advertises MaxMessageBytes, so a message of
// exactly that many bytes is accepted and one byte more is refused, by DATA,
// by BDAT and by the SIZE parameter.
func TestSMTPSizeEdges(t *testing.T) {
	t.Parallel()
	const limit = 20000
	tests := []struct {
		name string
		size int
		want string
	}{
		{"DATA of exactly the limit", limit, "250"},
		{"DATA of the limit plus one", limit + 1, "552 5.3.4"},
		{"BDAT of exactly the limit", limit, "250"},
		{"BDAT of the limit plus one", limit + 1, "552 5.3.4"},
		{"BDAT chunks of exactly the limit", limit, "250"},
		{"DATA with SIZE= the limit", limit, "250"},
	}
	h := newSMTPHarness(t, ingest.Config{MaxMessageBytes: limit})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m, cred := h.mailbox(t, 10*time.Minute)
			head, body := exactly(tc.size)
			msg := head + body
			script := envelope(m.Address)
			switch {
			case strings.HasPrefix(tc.name, "DATA with SIZE"):
				script[2].send += " SIZE=" + strconv.Itoa(tc.size)
				fallthrough
			case strings.HasPrefix(tc.name, "DATA"):
				// converse appends the CRLF after the terminator.
				script = append(script, step{send: "DATA", want: "354"}, step{send: msg + ".", want: tc.want})
			case strings.HasPrefix(tc.name, "BDAT chunks"):
				// converse appends CRLF: each chunk ends with one.
				script = append(script,
					step{send: "BDAT " + strconv.Itoa(len(head)) + "\r\n" + strings.TrimSuffix(head, "\r\n"), want: "250"},
					step{send: "BDAT " + strconv.Itoa(len(body)) + " LAST\r\n" + strings.TrimSuffix(body, "\r\n"), want: tc.want})
			default:
				script = append(script, step{send: "BDAT " + strconv.Itoa(len(msg)) + " LAST\r\n" + strings.TrimSuffix(msg, "\r\n"), want: tc.want})
			}
			converse(t, h.addr, script)
			want := 0
			if tc.want == "250" {
				want = 1
			}
			if got := len(h.messages(t, m, cred)); got != want {
				t.Errorf("mailbox holds %d messages, want %d", got, want)
			}
		})
	}
	t.Run("SIZE= the limit plus one", func(t *testing.T) {
		t.Parallel()
		converse(t, h.addr, []step{{want: "220"}, {send: "EHLO client.example.org", want: "250", has: []string{"SIZE 20000"}},
			{send: "MAIL FROM:<s@example.org> SIZE=20001", want: "552 5.3.4"},
			{send: "MAIL FROM:<s@example.org> SIZE=20000", want: "250"}})
	})
}
