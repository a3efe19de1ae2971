package ingest_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/mayfly/mayfly/ingest"
	"github.com/mayfly/mayfly/ratelimit"
)

// benchConfig lifts the per-IP limits, which a benchmark from one address
// would otherwise hit after 60 connections.
var benchConfig = ingest.Config{
	ConnRule:          ratelimit.Rule{Limit: 1 << 30},
	MailRule:          ratelimit.Rule{Limit: 1 << 30},
	MaxSessionsPerIP:  1 << 20,
	MaxSessionsPerNet: 1 << 20,
}

// BenchmarkSMTPDelivery is one full delivery per op over a new connection:
// connect, EHLO, MAIL, RCPT (one Redis call), DATA of 2 KiB (parse and one
// Redis script), QUIT, against the test cluster.
func BenchmarkSMTPDelivery(b *testing.B) {
	h := newSMTPHarness(b, benchConfig)
	m, _ := h.mailbox(b, 10*time.Minute)
	body := benchMessage(m.Address, 2<<10)
	b.SetBytes(int64(len(body)))
	b.ResetTimer()
	for b.Loop() {
		if err := deliverOnce(h.addr, m.Address, body); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}

// BenchmarkSMTPDeliveryParallel is the same with concurrent clients, which
// is what a node sees: Redis calls of several sessions share pipelines.
func BenchmarkSMTPDeliveryParallel(b *testing.B) {
	h := newSMTPHarness(b, benchConfig)
	m, _ := h.mailbox(b, 10*time.Minute)
	body := benchMessage(m.Address, 2<<10)
	b.SetBytes(int64(len(body)))
	b.SetParallelism(4)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := deliverOnce(h.addr, m.Address, body); err != nil {
				b.Error(err) // not Fatal: this is not the benchmark's goroutine
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}

// benchMessage is a plain message of about size bytes, ending with the DATA
// terminator.
func benchMessage(to string, size int) string {
	line := "The quick brown fox jumps over the lazy dog; your code is 123456.\r\n"
	body := strings.Repeat(line, size/len(line))
	return "From: Bench <bench@example.org>\r\nTo: <" + to + ">\r\nSubject: benchmark\r\n\r\n" + body + ".\r\n"
}

// deliverOnce runs one conversation; any reply but the expected one is an
// error.
func deliverOnce(addr, to, body string) error {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	r := bufio.NewReader(c)
	expect := func(code string) error {
		lines, err := readReply(r)
		if err != nil || len(lines) == 0 || !strings.HasPrefix(lines[len(lines)-1], code) {
			return fmt.Errorf("got %q (%v), want %s", lines, err, code)
		}
		return nil
	}
	if err := expect("220"); err != nil {
		return err
	}
	for _, step := range []struct{ send, want string }{
		{"EHLO bench.example.org\r\n", "250"},
		{"MAIL FROM:<bench@example.org>\r\n", "250"},
		{"RCPT TO:<" + to + ">\r\n", "250"},
		{"DATA\r\n", "354"},
		{body, "250"},
		{"QUIT\r\n", "221"},
	} {
		if _, err := io.WriteString(c, step.send); err != nil {
			return err
		}
		if err := expect(step.want); err != nil {
			return err
		}
	}
	return nil
}
