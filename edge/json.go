package edge

import (
	"bytes"
	"encoding/json"
	"io"
	"strconv"
	"time"

	"github.com/mayfly/mayfly/storage"
	"github.com/valyala/fasthttp"
)

// timeFormat is RFC 3339 in UTC with milliseconds: messages received in one
// second still sort.
const timeFormat = "2006-01-02T15:04:05.000Z07:00"

type mailboxView struct {
	ID           string `json:"id"`
	Address      string `json:"address"`
	Kind         string `json:"kind"`
	ExpiresAt    string `json:"expires_at"`
	MaxExpiresAt string `json:"max_expires_at"`
}

func viewMailbox(m storage.Mailbox) mailboxView {
	return mailboxView{
		ID: m.ID.String(), Address: m.Address, Kind: "temporary",
		ExpiresAt: formatTime(m.ExpiresAt), MaxExpiresAt: formatTime(m.MaxExpiresAt),
	}
}

type mailboxResponse struct {
	Data struct {
		Mailbox mailboxView `json:"mailbox"`
	} `json:"data"`
}

type summaryView struct {
	ID         string `json:"id"`
	To         string `json:"to"`
	From       string `json:"from"`
	Subject    string `json:"subject"`
	ReceivedAt string `json:"received_at"`
	Status     string `json:"status"`
}

func viewSummary(s storage.Summary) summaryView {
	return summaryView{ID: s.ID.String(), To: s.To, From: s.From, Subject: s.Subject, ReceivedAt: formatTime(s.ReceivedAt), Status: string(s.Status)}
}

// writeList writes the message list from the summaries as stored: each is
// the API object without received_at, which is appended from the stream
// entry's time. The page is copied into the response's own (pooled) body
// buffer: no decoding, no encoding, no intermediate buffer.
func writeList(ctx *fasthttp.RequestCtx, items []storage.Encoded, limit, offset int, more bool) {
	ctx.SetStatusCode(fasthttp.StatusOK)
	ctx.SetContentType("application/json")
	r := &ctx.Response
	r.AppendBodyString(`{"data":{"items":[`)
	for i, e := range items {
		if i > 0 {
			r.AppendBodyString(",")
		}
		appendEncoded(r, e)
	}
	var num [20]byte
	r.AppendBodyString(`],"pagination":{"limit":`)
	r.AppendBody(strconv.AppendInt(num[:0], int64(limit), 10))
	r.AppendBodyString(`,"offset":`)
	r.AppendBody(strconv.AppendInt(num[:0], int64(offset), 10))
	r.AppendBodyString(`,"has_more":`)
	r.AppendBody(strconv.AppendBool(num[:0], more))
	r.AppendBodyString("}}}\n")
}

// writeMessage writes one message as stored.
func writeMessage(ctx *fasthttp.RequestCtx, m storage.Encoded) {
	ctx.SetStatusCode(fasthttp.StatusOK)
	ctx.SetContentType("application/json")
	r := &ctx.Response
	r.AppendBodyString(`{"data":{"message":`)
	appendEncoded(r, m)
	r.AppendBodyString("}}\n")
}

// appendEncoded appends a stored object with its received_at.
func appendEncoded(r *fasthttp.Response, e storage.Encoded) {
	var ts [32]byte
	r.AppendBodyString(e.JSON[:len(e.JSON)-1]) // without its closing brace
	r.AppendBodyString(`,"received_at":"`)
	r.AppendBody(appendTime(ts[:0], e.ReceivedAt))
	r.AppendBodyString(`"}`)
}

type domainsResponse struct {
	Data struct {
		Domains []string `json:"domains"`
	} `json:"data"`
}

func formatTime(t time.Time) string { return t.UTC().Format(timeFormat) }

// appendTime appends t as formatTime does, digit by digit: the message list
// formats up to 100 of them per request, and the layout-driven AppendFormat
// costs ten times more. Years outside 0–9999 take the general path.
func appendTime(b []byte, t time.Time) []byte {
	t = t.UTC()
	y, mo, d := t.Date()
	if y < 0 || y > 9999 {
		return t.AppendFormat(b, timeFormat)
	}
	h, mi, s := t.Clock()
	ms := t.Nanosecond() / 1e6
	return append(b,
		byte('0'+y/1000), byte('0'+y/100%10), byte('0'+y/10%10), byte('0'+y%10), '-',
		byte('0'+int(mo)/10), byte('0'+int(mo)%10), '-', byte('0'+d/10), byte('0'+d%10), 'T',
		byte('0'+h/10), byte('0'+h%10), ':', byte('0'+mi/10), byte('0'+mi%10), ':',
		byte('0'+s/10), byte('0'+s%10), '.', byte('0'+ms/100), byte('0'+ms/10%10), byte('0'+ms%10), 'Z')
}

// writeJSON writes v as the response body with status.
func writeJSON(ctx *fasthttp.RequestCtx, status int, v any) {
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	enc := json.NewEncoder(ctx)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		// Only our own view types reach here: an encoding failure is a defect.
		ctx.ResetBody()
		ctx.SetStatusCode(500)
		ctx.SetBodyString(`{"error":{"code":"INTERNAL","message":"Temporary server failure; retry with backoff."},"request_id":"` + requestID(ctx) + `"}`)
	}
}

// intField is one integer field of a strict request body.
type intField struct {
	name     string
	min, max int
	required bool
	value    *int
}

// decodeBody parses body as one JSON object whose only fields are fields,
// each an integer within its bounds. Anything else is a 400 with a stable code.
func decodeBody(body []byte, fields ...intField) *apiError {
	obj, apiErr := decodeObject(body)
	if apiErr != nil {
		return apiErr
	}
next:
	for name := range obj {
		for _, f := range fields {
			if f.name == name {
				continue next
			}
		}
		return errUnknownField.with(map[string]any{"field": name})
	}
	for _, f := range fields {
		raw, ok := obj[f.name]
		if !ok {
			if f.required {
				return errInvalidField.with(map[string]any{"field": f.name, "reason": "required"})
			}
			continue
		}
		n, ok := parseIntLiteral(raw)
		if !ok || n < f.min || n > f.max {
			return errInvalidField.with(map[string]any{"field": f.name, "minimum": f.min, "maximum": f.max})
		}
		*f.value = n
	}
	return nil
}

// decodeObject reads body as exactly one JSON object and returns its
// members. A member named twice is refused: parsers disagree on which one
// wins (first, last, error), so accepting it would let a proxy and Mayfly
// read two different requests out of one body.
func decodeObject(body []byte) (map[string]json.RawMessage, *apiError) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, errInvalidJSON
	}
	obj := map[string]json.RawMessage{}
	for dec.More() {
		tok, err := dec.Token()
		key, ok := tok.(string)
		if err != nil || !ok {
			return nil, errInvalidJSON
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, errInvalidJSON
		}
		if _, dup := obj[key]; dup {
			return nil, errInvalidJSON.with(map[string]any{"reason": "duplicate key", "field": key})
		}
		obj[key] = raw
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return nil, errInvalidJSON
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errInvalidJSON.with(map[string]any{"reason": "trailing data after the JSON object"})
	}
	return obj, nil
}

// parseIntLiteral accepts a JSON integer literal only (no fraction, exponent
// or quotes) of a size that fits an int.
func parseIntLiteral(raw json.RawMessage) (int, bool) {
	s := bytes.TrimSpace(raw)
	if len(s) == 0 || len(s) > 10 {
		return 0, false
	}
	neg := s[0] == '-'
	if neg {
		s = s[1:]
	}
	if len(s) == 0 {
		return 0, false
	}
	n := 0
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	if neg {
		n = -n
	}
	return n, true
}
