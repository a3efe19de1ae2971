// Command flowrelay gives the k6 flow script (bench/k6/flow.js) the two
// protocols k6 does not speak: SMTP and server-sent events. For each
// POST /deliver it opens the inbox's event stream with the inbox's session
// cookie, sends one message to the inbox over SMTP, and answers once the
// stream delivered the message's message.received event:
//
//	POST /deliver {"to": address, "cookie": "service_session=…", "ip": "198.18.0.7"}
//	200 {"id": message id, "subject": …, "smtp_ms": …, "event_ms": …}
//	502 {"error": …} when any step failed
//
// event_ms is the time from the SMTP 250 to the event. It logs
// {"msg":"listening","kind":"http","addr":…} on stderr.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/mayfly/mayfly/bench/internal/load"
)

type relay struct {
	api, smtp string
	sources   *load.SourcePool
	seq       atomic.Int64
}

type deliverRequest struct {
	To, Cookie, IP string
}

type deliverResponse struct {
	ID      string  `json:"id"`
	Subject string  `json:"subject"`
	SMTPms  float64 `json:"smtp_ms"`
	EventMs float64 `json:"event_ms"`
}

func (r *relay) deliver(req deliverRequest) (deliverResponse, error) {
	st, err := load.OpenStream(r.api, req.Cookie, req.IP, nil, 10*time.Second)
	if err != nil {
		return deliverResponse{}, err
	}
	defer st.Close()
	n := r.seq.Add(1)
	subject := "flow-" + strconv.FormatInt(time.Now().UnixNano(), 36) + "-" + strconv.FormatInt(n, 10)
	got := make(chan string, 1)
	go st.Read(func(ev load.Event) {
		var s struct{ ID, Subject string }
		if ev.Type == "message.received" && json.Unmarshal([]byte(ev.Data), &s) == nil && s.Subject == subject {
			select {
			case got <- s.ID:
			default:
			}
		}
	})
	t0 := time.Now()
	c, err := load.DialSMTP(r.smtp, r.sources.Addr(int(n)), 10*time.Second)
	if err != nil {
		return deliverResponse{}, err
	}
	if err := c.Send("flow@bench.example", req.To, load.Message(subject, 2048), 10*time.Second); err != nil {
		c.Abort()
		return deliverResponse{}, err
	}
	accepted := time.Now()
	c.Close()
	select {
	case id := <-got:
		return deliverResponse{
			ID: id, Subject: subject,
			SMTPms:  float64(accepted.Sub(t0).Microseconds()) / 1000,
			EventMs: float64(max(0, time.Since(accepted)).Microseconds()) / 1000,
		}, nil
	case <-time.After(5 * time.Second):
		return deliverResponse{}, errors.New("no message.received event within 5s of the SMTP 250")
	}
}

func (r *relay) ServeHTTP(w http.ResponseWriter, hr *http.Request) {
	var req deliverRequest
	if hr.Method != "POST" || hr.URL.Path != "/deliver" {
		http.Error(w, `{"error":"POST /deliver only"}`, http.StatusNotFound)
		return
	}
	if err := json.NewDecoder(hr.Body).Decode(&req); err != nil || req.To == "" || req.Cookie == "" {
		http.Error(w, `{"error":"want {to, cookie, ip}"}`, http.StatusBadRequest)
		return
	}
	resp, err := r.deliver(req)
	w.Header().Set("Content-Type", "application/json")
	if err != nil {
		w.WriteHeader(http.StatusBadGateway)
		json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
		return
	}
	json.NewEncoder(w).Encode(resp)
}

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	api := flag.String("api", "http://127.0.0.1:8080/v1", "Mayfly API base URL")
	smtpAddr := flag.String("smtp", "127.0.0.1:2525", "Mayfly SMTP address")
	src := flag.String("src", "127.3.0.0/16", "loopback CIDR for SMTP source addresses")
	flag.Parse()
	sources, err := load.NewSourcePool(*src)
	if err != nil {
		fmt.Fprintln(os.Stderr, "flowrelay:", err)
		os.Exit(2)
	}
	ln, log := load.Listen("http", *addr)
	srv := &http.Server{Handler: &relay{api: *api, smtp: *smtpAddr, sources: sources}, ReadHeaderTimeout: 10 * time.Second}
	if err := srv.Serve(ln); err != nil {
		log.Error("serve", "err", err)
		os.Exit(1)
	}
}
