// Command hello is the HTTP reference of the benchmarks: a fasthttp server
// with the same server settings as the edge that answers every request with a
// fixed 200 JSON body, so that a load tool's req/s against it is the ceiling
// for Mayfly's on the same machine.
//
//	hello -addr 127.0.0.1:0
//
// It logs {"msg":"listening","kind":"http","addr":…} on stderr, like mayfly.
package main

import (
	"flag"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/valyala/fasthttp"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	flag.Parse()
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Error("listen", "err", err)
		os.Exit(1)
	}
	body := []byte(`{"data":{"ok":true}}`)
	srv := &fasthttp.Server{
		Handler: func(ctx *fasthttp.RequestCtx) {
			ctx.SetContentType("application/json")
			ctx.SetBody(body)
		},
		Name:                          "hello",
		NoDefaultServerHeader:         true,
		DisableHeaderNamesNormalizing: false,
		ReadBufferSize:                8 << 10,
	}
	log.Info("listening", "kind", "http", "addr", ln.Addr().String())
	go func() {
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
		<-sig
		srv.Shutdown()
	}()
	if err := srv.Serve(ln); err != nil {
		log.Error("serve", "err", err)
		os.Exit(1)
	}
}
