// Command smtpsink is the SMTP reference of the benchmarks: a go-smtp server
// that accepts every recipient and reads and discards every message, so that
// smtpload's msgs/s against it is the ceiling for Mayfly's ingest on the same
// machine.
//
//	smtpsink -addr 127.0.0.1:0
//
// It logs {"msg":"listening","kind":"smtp","addr":…} on stderr, like mayfly.
package main

import (
	"flag"
	"io"
	"os"
	"time"

	"github.com/emersion/go-smtp"
	"github.com/mayfly/mayfly/bench/internal/load"
)

type backend struct{}

func (backend) NewSession(*smtp.Conn) (smtp.Session, error) { return &session{}, nil }

type session struct{}

func (*session) Mail(string, *smtp.MailOptions) error { return nil }
func (*session) Rcpt(string, *smtp.RcptOptions) error { return nil }
func (*session) Data(r io.Reader) error {
	_, err := io.Copy(io.Discard, r)
	return err
}
func (*session) Reset()        {}
func (*session) Logout() error { return nil }

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	flag.Parse()
	ln, log := load.Listen("smtp", *addr)
	srv := smtp.NewServer(backend{})
	srv.Domain = "sink.bench.example"
	srv.MaxMessageBytes = 10 << 20
	srv.MaxRecipients = 50
	srv.MaxLineLength = 256 << 10
	srv.ReadTimeout = time.Minute
	srv.WriteTimeout = time.Minute
	srv.EnableSMTPUTF8 = true
	srv.EnableBINARYMIME = true
	load.OnSignal(func() { srv.Close() })
	if err := srv.Serve(ln); err != nil && err != smtp.ErrServerClosed {
		log.Error("serve", "err", err)
		os.Exit(1)
	}
}
