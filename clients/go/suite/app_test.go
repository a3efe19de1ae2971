//go:build suite

package suite

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/smtp"
	"net/textproto"
	"strings"
	"sync"
	"time"
)

// app is the system under test: a tiny signup service. POST /signup
// (form field email) mails a 6-digit code and a "Verify your email" link;
// POST /verify-code (email, code) checks the code; GET /verify?token=…
// follows the link; GET /status?email=… says "verified" once both were
// done.
type app struct {
	base   string // http://127.0.0.1:port
	mailer *mailer

	mu    sync.Mutex
	users map[string]*user // by email, lower-cased
	byTok map[string]*user
}

type user struct {
	email, code, token string
	codeOK, linkOK     bool
}

// startApp serves the app on a free loopback port, its mail going out
// through a mailer to smtpAddr.
func startApp(smtpAddr string) (*app, func(), error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, err
	}
	a := &app{base: "http://" + l.Addr().String(), users: map[string]*user{}, byTok: map[string]*user{},
		mailer: newMailer(smtpAddr)}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /signup", a.signup)
	mux.HandleFunc("POST /verify-code", a.verifyCode)
	mux.HandleFunc("GET /verify", a.verifyLink)
	mux.HandleFunc("GET /status", a.status)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(l)
	return a, func() { srv.Close(); a.mailer.close() }, nil
}

func (a *app) signup(w http.ResponseWriter, r *http.Request) {
	email := strings.ToLower(strings.TrimSpace(r.FormValue("email")))
	if !strings.Contains(email, "@") {
		http.Error(w, "an email address, please", http.StatusBadRequest)
		return
	}
	n, _ := rand.Int(rand.Reader, big.NewInt(1_000_000))
	tok := make([]byte, 16)
	rand.Read(tok)
	u := &user{email: email, code: fmt.Sprintf("%06d", n.Int64()), token: hex.EncodeToString(tok)}
	a.mu.Lock()
	a.users[email] = u
	a.byTok[u.token] = u
	a.mu.Unlock()
	link := a.base + "/verify?token=" + u.token
	a.mailer.send(email, "Confirm your signup",
		"Welcome!\r\n\r\nYour verification code is "+u.code+".\r\n\r\nOr verify your email: "+link+"\r\n",
		`<p>Welcome!</p><p>Your verification code is <b>`+u.code+`</b>.</p>`+
			`<p><a href="`+link+`">Verify your email</a></p><p><a href="`+a.base+`/">Home</a></p>`)
	w.WriteHeader(http.StatusAccepted)
	fmt.Fprintln(w, "check your mail")
}

func (a *app) verifyCode(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	defer a.mu.Unlock()
	u := a.users[strings.ToLower(r.FormValue("email"))]
	if u == nil || r.FormValue("code") != u.code {
		http.Error(w, "wrong code", http.StatusBadRequest)
		return
	}
	u.codeOK = true
	fmt.Fprintln(w, "code accepted")
}

func (a *app) verifyLink(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	defer a.mu.Unlock()
	u := a.byTok[r.FormValue("token")]
	if u == nil {
		http.Error(w, "unknown link", http.StatusNotFound)
		return
	}
	u.linkOK = true
	fmt.Fprintln(w, "Your email is verified.")
}

func (a *app) status(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	defer a.mu.Unlock()
	u := a.users[strings.ToLower(r.FormValue("email"))]
	switch {
	case u == nil:
		http.Error(w, "unknown", http.StatusNotFound)
	case u.codeOK && u.linkOK:
		fmt.Fprintln(w, "verified")
	default:
		fmt.Fprintln(w, "pending")
	}
}

// mailer is the app's outgoing mail queue, as a real app's MTA: one SMTP
// connection kept open, the mails sent in order, and a refusal for now
// (4xx: the public service's 120 transactions and 60 connections a minute
// per IP) or a broken connection retried after a pause on a new
// connection. A permanent refusal (5xx) drops the mail, logged.
type mailer struct {
	addr  string
	queue chan mail
	done  chan struct{}
	conn  *smtp.Client
}

type mail struct{ to, subject, text, html string }

func newMailer(addr string) *mailer {
	m := &mailer{addr: addr, queue: make(chan mail, 10000), done: make(chan struct{})}
	go m.run()
	return m
}

func (m *mailer) send(to, subject, text, html string) { m.queue <- mail{to, subject, text, html} }

func (m *mailer) close() { close(m.queue); <-m.done }

func (m *mailer) run() {
	defer close(m.done)
	for ml := range m.queue {
		for pause := time.Second; ; pause = min(2*pause, 5*time.Second) {
			err := m.deliver(ml)
			if err == nil {
				break
			}
			if m.conn != nil {
				m.conn.Close()
				m.conn = nil
			}
			var te *textproto.Error
			if errors.As(err, &te) && te.Code >= 500 {
				log.Printf("signup app: mail to %s refused for good: %v", ml.to, err)
				break
			}
			time.Sleep(pause)
		}
	}
	if m.conn != nil {
		m.conn.Quit()
	}
}

func (m *mailer) deliver(ml mail) error {
	if m.conn == nil {
		c, err := smtp.Dial(m.addr)
		if err != nil {
			return err
		}
		if err := c.Hello("signup.app.test"); err != nil {
			c.Close()
			return err
		}
		m.conn = c
	}
	c := m.conn
	if err := c.Mail("noreply@signup.app.test"); err != nil {
		return err
	}
	if err := c.Rcpt(ml.to); err != nil {
		return err
	}
	w, err := c.Data()
	if err != nil {
		return err
	}
	const boundary = "signup-boundary-7f3a"
	fmt.Fprintf(w, "From: Signup App <noreply@signup.app.test>\r\nTo: <%s>\r\nSubject: %s\r\n"+
		"MIME-Version: 1.0\r\nContent-Type: multipart/alternative; boundary=%q\r\n\r\n"+
		"--%s\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n%s\r\n"+
		"--%s\r\nContent-Type: text/html; charset=utf-8\r\n\r\n%s\r\n--%s--\r\n",
		ml.to, ml.subject, boundary, boundary, ml.text, boundary, ml.html, boundary)
	return w.Close()
}
