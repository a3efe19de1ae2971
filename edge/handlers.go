package edge

import (
	"context"
	"math"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/mayfly/mayfly/storage"
	"github.com/valyala/fasthttp"
)

func (s *Server) handleDomains(ctx *fasthttp.RequestCtx, _ *call) error {
	var resp domainsResponse
	resp.Data.Domains = s.cfg.Domains
	writeJSON(ctx, fasthttp.StatusOK, &resp)
	return nil
}

func (s *Server) handleOpenAPI(ctx *fasthttp.RequestCtx, _ *call) error {
	ctx.Response.Header.Set("Cache-Control", "public, max-age=300")
	ctx.SetContentType("application/yaml")
	ctx.SetBody(openAPIDoc)
	return nil
}

func (s *Server) handleCreateMailbox(ctx *fasthttp.RequestCtx, c *call) error {
	minutes := 10
	bodyErr := s.checkBody(ctx, intField{name: "lifetime_minutes", min: 1, max: 10, value: &minutes})
	lifetime := time.Duration(minutes) * time.Minute

	// Every attempt counts against the creation windows, a bad body too; the
	// limiter reserves the active-inbox slot under the new tag atomically.
	tag := storage.NewTag()
	d, err := s.limiter.ReserveCreation(c.ctx, c.client, tag, lifetime, bodyErr == nil)
	switch {
	case err != nil:
		return err
	case !d.Allowed && d.Kind != "":
		return s.refuse(d)
	case bodyErr != nil:
		return bodyErr
	}
	g, err := s.limiter.AllowGlobalCreation(c.ctx)
	if err != nil || !g.Allowed {
		s.release(c.client, tag)
		if err != nil {
			return err
		}
		return s.refuse(g)
	}
	domain := s.cfg.Domains[rand.IntN(len(s.cfg.Domains))]
	m, cred, err := s.store.Create(c.ctx, tag, domain, lifetime, c.client)
	if err != nil {
		s.release(c.client, tag)
		return err
	}
	s.setCookie(ctx, s.scopedCookieName(m.ID), cred.String(), m.MaxExpiresAt)
	writeMailbox(ctx, fasthttp.StatusCreated, m)
	return nil
}

func (s *Server) handleSelectMailbox(ctx *fasthttp.RequestCtx, c *call) error {
	id, err := pathUUID(ctx, "mailbox_id")
	if err != nil {
		return err
	}
	raw := ctx.Request.Header.Cookie(s.scopedCookieName(id))
	if len(raw) == 0 {
		return errCredentialMissing
	}
	scoped, ok := storage.ParseCredential(string(raw))
	if !ok {
		return errCredentialInvalid
	}
	m, sess, err := s.store.Select(c.ctx, id, scoped)
	if err != nil {
		return err
	}
	s.setCookie(ctx, sessionCookie, sess.String(), m.MaxExpiresAt)
	writeMailbox(ctx, fasthttp.StatusOK, m)
	return nil
}

func (s *Server) handleGetCurrent(ctx *fasthttp.RequestCtx, c *call) error {
	sess, err := session(ctx)
	if err != nil {
		return err
	}
	m, err := s.store.Current(c.ctx, sess)
	if err != nil {
		return err
	}
	writeMailbox(ctx, fasthttp.StatusOK, m)
	return nil
}

func (s *Server) handleExtendCurrent(ctx *fasthttp.RequestCtx, c *call) error {
	sess, err := session(ctx)
	if err != nil {
		return err
	}
	var minutes int
	if err := s.checkBody(ctx, intField{name: "extension_minutes", min: 1, max: 10, required: true, value: &minutes}); err != nil {
		return err
	}
	m, owner, err := s.store.Extend(c.ctx, sess, time.Duration(minutes)*time.Minute)
	if err != nil {
		return err
	}
	// The owner's active-inbox slot must live as long as the mailbox.
	if err := s.limiter.ExtendActive(c.ctx, owner, sess.Tag, m.ExpiresAt); err != nil {
		s.log.Warn("extend active slot", "request_id", requestID(ctx), "err", err)
	}
	writeMailbox(ctx, fasthttp.StatusOK, m)
	return nil
}

func (s *Server) handleDeleteCurrent(ctx *fasthttp.RequestCtx, c *call) error {
	sess, err := session(ctx)
	if err != nil {
		return err
	}
	owner, err := s.store.Destroy(c.ctx, sess)
	if err != nil {
		return err
	}
	s.release(owner, sess.Tag)
	s.clearCookie(ctx, sessionCookie)
	ctx.SetStatusCode(fasthttp.StatusNoContent)
	return nil
}

func (s *Server) handleListMessages(ctx *fasthttp.RequestCtx, c *call) error {
	sess, err := session(ctx)
	if err != nil {
		return err
	}
	args := ctx.QueryArgs()
	limit, err := queryInt(args, "limit", 20, 1, 100)
	if err != nil {
		return err
	}
	// Any offset ≥ 0 that fits 64 bits: one past the end is an empty page.
	offset, err := queryInt(args, "offset", 0, 0, math.MaxInt64)
	if err != nil {
		return err
	}
	items, more, err := s.store.MessagesJSON(c.ctx, sess, storage.Page{Limit: limit, Offset: offset})
	if err != nil {
		return err
	}
	writeList(ctx, items, limit, offset, more)
	return nil
}

func (s *Server) handleGetMessage(ctx *fasthttp.RequestCtx, c *call) error {
	sess, err := session(ctx)
	if err != nil {
		return err
	}
	id, err := pathUUID(ctx, "message_id")
	if err != nil {
		return err
	}
	m, err := s.store.MessageJSON(c.ctx, sess, id)
	if err != nil {
		return err
	}
	writeMessage(ctx, m)
	return nil
}

func (s *Server) handleDeleteMessage(ctx *fasthttp.RequestCtx, c *call) error {
	sess, err := session(ctx)
	if err != nil {
		return err
	}
	id, err := pathUUID(ctx, "message_id")
	if err != nil {
		return err
	}
	if err := s.store.DeleteMessage(c.ctx, sess, id); err != nil {
		return err
	}
	ctx.SetStatusCode(fasthttp.StatusNoContent)
	return nil
}

// checkBody enforces the body size limit, then decodes the strict body.
func (s *Server) checkBody(ctx *fasthttp.RequestCtx, fields ...intField) *apiError {
	body := ctx.PostBody()
	if len(body) > s.cfg.MaxBodyBytes || bodyRefused(ctx) {
		return errBodyTooLarge.with(map[string]any{"limit_bytes": s.cfg.MaxBodyBytes})
	}
	return decodeBody(body, fields...)
}

// release frees an active-inbox slot. It runs after the request's own Redis
// budget may be spent, so it has its own; a failure only frees the slot late
// (at the mailbox's expiry), so it is logged, not returned.
func (s *Server) release(owner, tag string) {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.RedisTimeout)
	defer cancel()
	if err := s.limiter.Release(ctx, owner, tag); err != nil {
		s.log.Warn("release active slot", "err", err)
	}
}

func writeMailbox(ctx *fasthttp.RequestCtx, status int, m storage.Mailbox) {
	var resp mailboxResponse
	resp.Data.Mailbox = viewMailbox(m)
	writeJSON(ctx, status, &resp)
}

// session reads the current-inbox cookie.
func session(ctx *fasthttp.RequestCtx) (storage.Credential, error) {
	raw := ctx.Request.Header.Cookie(sessionCookie)
	if len(raw) == 0 {
		return storage.Credential{}, errSessionRequired
	}
	c, ok := storage.ParseCredential(string(raw))
	if !ok {
		return storage.Credential{}, errSessionInvalid
	}
	return c, nil
}

// pathUUID parses a path parameter as a UUID in its canonical 36-character
// form (uuid.Parse alone would also take braces, URNs and bare hex).
func pathUUID(ctx *fasthttp.RequestCtx, name string) (uuid.UUID, error) {
	v, _ := ctx.UserValue(name).(string)
	if len(v) != 36 {
		return uuid.UUID{}, errInvalidUUID.with(map[string]any{"parameter": name})
	}
	id, err := uuid.Parse(v)
	if err != nil {
		return uuid.UUID{}, errInvalidUUID.with(map[string]any{"parameter": name})
	}
	return id, nil
}

// queryInt reads an optional integer query parameter within [lo, hi]. A
// present but empty, signed, fractional or out-of-range value is a 400.
func queryInt(args *fasthttp.Args, name string, def, lo, hi int) (int, error) {
	if !args.Has(name) {
		return def, nil
	}
	v := args.Peek(name)
	bad := errInvalidPagination.with(map[string]any{"parameter": name})
	if len(v) == 0 || len(v) > 19 { // 2^63-1 has 19 digits
		return 0, bad
	}
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, bad
		}
	}
	n, err := strconv.Atoi(string(v))
	if err != nil || n < lo || n > hi {
		return 0, bad
	}
	return n, nil
}
