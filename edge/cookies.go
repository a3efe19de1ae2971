package edge

import (
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/valyala/fasthttp"
)

// sessionCookie is the current-inbox cookie of spec §5.
const sessionCookie = "service_session"

// cookiePath covers the whole API and nothing else of the host.
const cookiePath = "/v1"

// scopedCookieName is "<prefix>_<mailbox uuid without hyphens>".
func (s *Server) scopedCookieName(id uuid.UUID) string {
	return s.cfg.CookiePrefix + "_" + strings.ReplaceAll(id.String(), "-", "")
}

// setCookie issues a host-only, HttpOnly, SameSite=Lax cookie on the API path
// that expires no later than expires (the mailbox's max_expires_at).
func (s *Server) setCookie(ctx *fasthttp.RequestCtx, name, value string, expires time.Time) {
	c := fasthttp.AcquireCookie()
	defer fasthttp.ReleaseCookie(c)
	c.SetKey(name)
	c.SetValue(value)
	c.SetPath(cookiePath)
	c.SetHTTPOnly(true)
	c.SetSameSite(fasthttp.CookieSameSiteLaxMode)
	c.SetSecure(!s.cfg.CookieInsecure)
	c.SetExpire(expires)
	ctx.Response.Header.SetCookie(c)
}

// clearCookie tells the client to drop a cookie now (Max-Age=0, same Path).
func (s *Server) clearCookie(ctx *fasthttp.RequestCtx, name string) {
	c := fasthttp.AcquireCookie()
	defer fasthttp.ReleaseCookie(c)
	c.SetKey(name)
	c.SetPath(cookiePath)
	c.SetHTTPOnly(true)
	c.SetSameSite(fasthttp.CookieSameSiteLaxMode)
	c.SetSecure(!s.cfg.CookieInsecure)
	c.SetMaxAge(-1)
	ctx.Response.Header.SetCookie(c)
}
