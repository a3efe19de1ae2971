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
	"os"

	"github.com/mayfly/mayfly/bench/internal/load"
	"github.com/valyala/fasthttp"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	flag.Parse()
	ln, log := load.Listen("http", *addr)
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
	load.OnSignal(func() { srv.Shutdown() })
	if err := srv.Serve(ln); err != nil {
		log.Error("serve", "err", err)
		os.Exit(1)
	}
}
