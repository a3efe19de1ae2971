package edge

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/fasthttp/router"
	"github.com/mayfly/mayfly/ratelimit"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"
)

// call is what a handler knows of its request beyond the fasthttp context:
// a real context with the request's Redis deadline and the client's
// rate-limit key.
type call struct {
	ctx    context.Context
	client string
}

type handlerFunc func(ctx *fasthttp.RequestCtx, c *call) error

// routeCreate is the route of POST /mailboxes, whose refused bodies count
// against the creation windows.
const routeCreate = "POST /mailboxes"

// routeEvents is the route of GET /events, whose 503 REQUEST_PROTECTION
// has a spread Retry-After (streamRetryAfter).
const routeEvents = "GET /events"

// routes lists every endpoint of the API.
func (s *Server) routes() fasthttp.RequestHandler {
	r := router.New()
	// Redirects and automatic OPTIONS answers would bypass the error envelope
	// (and an OPTIONS answer looks like CORS support, which we do not offer).
	r.RedirectTrailingSlash = false
	r.RedirectFixedPath = false
	r.HandleOPTIONS = false
	r.HandleMethodNotAllowed = true

	v1 := r.Group("/v1")
	v1.GET("/domains", s.wrap("GET /domains", s.handleDomains))
	v1.GET("/openapi.yaml", s.wrap("GET /openapi.yaml", s.handleOpenAPI))
	v1.POST("/mailboxes", s.wrap(routeCreate, s.handleCreateMailbox))
	v1.POST("/mailboxes/{mailbox_id}/select", s.wrap("POST /mailboxes/{id}/select", s.handleSelectMailbox))
	v1.GET("/mailboxes/current", s.wrap("GET /mailboxes/current", s.handleGetCurrent))
	v1.PATCH("/mailboxes/current", s.wrap("PATCH /mailboxes/current", s.handleExtendCurrent))
	v1.DELETE("/mailboxes/current", s.wrap("DELETE /mailboxes/current", s.handleDeleteCurrent))
	v1.GET("/messages", s.wrap("GET /messages", s.handleListMessages))
	v1.GET("/messages/{message_id}", s.wrap("GET /messages/{id}", s.handleGetMessage))
	v1.DELETE("/messages/{message_id}", s.wrap("DELETE /messages/{id}", s.handleDeleteMessage))
	v1.GET("/events", s.wrap(routeEvents, s.handleEvents))

	r.NotFound = s.wrap("not found", func(ctx *fasthttp.RequestCtx, _ *call) error { return outsideV1(r, ctx) })
	r.MethodNotAllowed = s.wrap("method not allowed", func(ctx *fasthttp.RequestCtx, _ *call) error {
		// The router lists OPTIONS as allowed, but we answer it with 405 too.
		var allow []string
		for m := range strings.SplitSeq(string(ctx.Response.Header.Peek("Allow")), ",") {
			if m = strings.TrimSpace(m); m != "" && m != fasthttp.MethodOptions {
				allow = append(allow, m)
			}
		}
		ctx.Response.Header.Set("Allow", strings.Join(allow, ", "))
		return errMethodNotAllowed
	})
	return r.Handler
}

// wrap is the one middleware every request passes: request id and common
// headers, the in-flight bound, the per-IP request rate, the handler, the
// error envelope and the metrics.
func (s *Server) wrap(route string, h handlerFunc) fasthttp.RequestHandler {
	// The counter of each status, looked up once (WithLabelValues hashes
	// its labels on every call).
	var byStatus [600]atomic.Pointer[prometheus.Counter]
	requests := func(status int) {
		if status < 0 || status >= len(byStatus) {
			s.metrics.requests.WithLabelValues(route, strconv.Itoa(status)).Inc()
			return
		}
		c := byStatus[status].Load()
		if c == nil {
			counter := s.metrics.requests.WithLabelValues(route, strconv.Itoa(status))
			c = &counter
			byStatus[status].Store(c)
		}
		(*c).Inc()
	}
	latency := s.metrics.latency.WithLabelValues(route)
	together := togetherRoutes[route]
	return func(ctx *fasthttp.RequestCtx) {
		start := time.Now()
		setRequestID(ctx)
		setCommonHeaders(ctx)
		if s.draining.Load() {
			// The client's next request opens a new connection, which
			// the load balancer gives another node (see Drain).
			ctx.SetConnectionClose()
		}
		defer func() {
			requests(ctx.Response.StatusCode())
			latency.Observe(time.Since(start).Seconds())
			s.access.record(ctx, route, start, s.cfg.TrustedProxies)
		}()
		if conflictingLength(&ctx.Request.Header) {
			ctx.SetConnectionClose()
			s.fail(ctx, route, errMalformed.with(map[string]any{"reason": "both Transfer-Encoding and Content-Length"}))
			return
		}
		if s.inFlight.Add(1) > int64(s.cfg.MaxInFlight) {
			s.inFlight.Add(-1)
			s.fail(ctx, route, errProtection)
			if s.guard.overShare(peerIP(ctx.RemoteAddr())) {
				ctx.SetConnectionClose()
			}
			return
		}
		defer s.inFlight.Add(-1)

		c, cancel := context.WithTimeout(context.Background(), s.cfg.RedisTimeout)
		defer cancel()
		cl := &call{ctx: c, client: s.clientKey(ctx)}
		var err error
		if together && !bodyRefused(ctx) && s.hint.take(cl.client, start, s.limiter.Config().RequestsPerSecond) {
			err = s.countWith(ctx, cl, h)
		} else {
			err = s.countThen(ctx, route, cl, h)
		}
		if err != nil {
			s.fail(ctx, route, err)
			if ae := toAPIError(err); (ae.status == 429 || ae == errProtection) && s.guard.overShare(peerIP(ctx.RemoteAddr())) {
				ctx.SetConnectionClose()
			}
		}
	}
}

// countThen counts the request, then runs the handler if it is admitted,
// and returns the error to answer with.
func (s *Server) countThen(ctx *fasthttp.RequestCtx, route string, cl *call, h handlerFunc) error {
	d, err := s.allowRequest(ctx.IsGet() || ctx.IsHead(), cl)
	if err == nil && !d.Allowed {
		s.hint.refused(cl.client, time.Now())
		err = s.refuse(d)
	}
	switch {
	case err != nil:
	case bodyRefused(ctx) && route != routeCreate:
		// Only creation does anything with a refused body (it counts it
		// against the creation windows); every other route answers 413
		// at once, whatever it would do with a body it ignores.
		err = errBodyTooLarge.with(map[string]any{"limit_bytes": s.cfg.MaxBodyBytes})
	default:
		err = h(ctx, cl)
	}
	return err
}

// togetherRoutes are the reads whose request count and own Redis call go
// out at once while the client is well under its limit (countWith): one
// round trip instead of two. Their handlers only read, and write nothing
// to the response that an answer of 429 would not replace.
var togetherRoutes = map[string]bool{"GET /messages": true, "GET /messages/{id}": true}

// countWith runs a read's rate count and its handler at once and returns
// the error to answer with, as countThen would have: a refusal discards
// whatever the handler wrote for the 429 (the read was made, but nothing
// of it is sent); a count that cannot reach Redis lets the read through,
// as allowRequest does.
func (s *Server) countWith(ctx *fasthttp.RequestCtx, cl *call, h handlerFunc) error {
	counting := s.startCount(cl)
	err := h(ctx, cl)
	d, cerr := counting.wait()
	switch {
	case cerr != nil:
		err = cerr
	case !d.Allowed:
		s.hint.refused(cl.client, time.Now())
		ctx.ResetBody()
		ctx.Response.Header.DelAllCookies()
		err = s.refuse(d)
	}
	return err
}

// allowRequest is the per-client request rate check. A read (GET, HEAD)
// whose check cannot reach Redis is served anyway (fails open): the
// client's counter lives on one primary, the mailbox on another, and a
// failed or cut-off primary must not take every reader whose counter it
// held down with it until the cluster notices. The check of a read gets
// half of the request's Redis budget, so the read itself keeps the rest.
// Writes still fail closed (503): creation has its own limits on the same
// primary, and a write that cannot be counted is not let through.
func (s *Server) allowRequest(read bool, cl *call) (ratelimit.Decision, error) {
	if !read {
		return s.limiter.AllowRequest(cl.ctx, cl.client)
	}
	c, cancel := context.WithTimeout(cl.ctx, s.cfg.RedisTimeout/2)
	defer cancel()
	d, err := s.limiter.AllowRequest(c, cl.client)
	if err != nil && errors.Is(err, ratelimit.ErrUnavailable) {
		s.metrics.redisErrors.Inc()
		return ratelimit.Decision{Allowed: true}, nil
	}
	return d, err
}

// refuse counts a limiter's refusal and returns its API error.
func (s *Server) refuse(d ratelimit.Decision) error {
	s.metrics.rejections.WithLabelValues(string(d.Kind)).Inc()
	return decisionError(d)
}

// fail answers with the error envelope for err, logging what the client
// must not see.
func (s *Server) fail(ctx *fasthttp.RequestCtx, route string, err error) {
	ae := toAPIError(err)
	switch {
	case ae == errUnavailable:
		s.metrics.redisErrors.Inc()
		s.log.Warn("redis unavailable", "route", route, "request_id", requestID(ctx), "err", err)
	case ae.status >= 500 && ae != errProtection:
		s.log.Error("request failed", "route", route, "request_id", requestID(ctx), "err", err)
	}
	if ae == errProtection && route == routeEvents {
		ae = streamRetryAfter()
	}
	writeError(ctx, ae)
}

// apiPrefix is where every endpoint lives.
const apiPrefix = "/v1"

// outsideV1 is the 404 of a path no route matches. A path outside /v1 (a
// base URL without it, the usual mistake) gets ROUTE_NOT_FOUND with a hint:
// the message and details name /v1 and the path to try instead, which is
// /v1 plus the path when that is an endpoint for the method, else the API
// description /v1/openapi.yaml. Other unknown paths get the plain
// ROUTE_NOT_FOUND.
func outsideV1(r *router.Router, ctx *fasthttp.RequestCtx) error {
	path := string(ctx.Path())
	if path == apiPrefix || strings.HasPrefix(path, apiPrefix+"/") {
		return errRouteNotFound
	}
	try := apiPrefix + "/openapi.yaml"
	if h, _ := r.Lookup(string(ctx.Method()), apiPrefix+path, ctx); h != nil {
		try = apiPrefix + path
	}
	e := errOutsideV1.with(map[string]any{"api_prefix": apiPrefix, "try": try})
	e.message = "No such endpoint: the API is under " + apiPrefix + " (is it missing from the base URL?): try " + try + "."
	return e
}
