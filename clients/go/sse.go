package client

import (
	"strconv"
	"strings"
	"time"
)

// The event-stream (SSE) parser: the rules of the HTML standard's
// "text/event-stream" interpretation that the API uses, as
// clients/testdata/sse.json pins them for the three clients. It is fed the
// body's chunks as they come; a line ends at LF, CR or CRLF, even split
// between chunks.

// sseEvent is one dispatched event: its type ("message" when the stream
// named none), its data (the data lines joined by line feeds) and the last
// id the stream set.
type sseEvent struct {
	Event, Data, ID string
}

// sseParser holds a stream's state between chunks.
type sseParser struct {
	line      []byte
	pendingCR bool // the last chunk ended with CR: a LF opening the next ends nothing
	event     string
	data      strings.Builder
	hasData   bool
	id        string
	// retry is the stream's last valid retry field (all digits: ms);
	// retrySet says one came.
	retry    time.Duration
	retrySet bool
}

// feed parses chunk, calling onEvent for each event dispatched and
// onComment for each comment line (its text after the colon). It stops,
// returning false, when a callback returns false.
func (p *sseParser) feed(chunk []byte, onEvent func(sseEvent) bool, onComment func(string) bool) bool {
	for _, c := range chunk {
		if p.pendingCR {
			p.pendingCR = false
			if c == '\n' {
				continue // the LF of a CRLF
			}
		}
		switch c {
		case '\r':
			p.pendingCR = true
			fallthrough
		case '\n':
			line := string(p.line)
			p.line = p.line[:0]
			if !p.processLine(line, onEvent, onComment) {
				return false
			}
		default:
			p.line = append(p.line, c)
		}
	}
	return true
}

func (p *sseParser) processLine(line string, onEvent func(sseEvent) bool, onComment func(string) bool) bool {
	if line == "" { // dispatch
		ev := sseEvent{Event: p.event, Data: p.data.String(), ID: p.id}
		had := p.hasData
		p.event, p.hasData = "", false
		p.data.Reset()
		if !had {
			return true
		}
		if ev.Event == "" {
			ev.Event = "message"
		}
		return onEvent == nil || onEvent(ev)
	}
	name, value, found := strings.Cut(line, ":")
	if found && name == "" {
		return onComment == nil || onComment(value)
	}
	value = strings.TrimPrefix(value, " ")
	switch name {
	case "event":
		p.event = value
	case "data":
		if p.hasData {
			p.data.WriteByte('\n')
		}
		p.data.WriteString(value)
		p.hasData = true
	case "id":
		if !strings.ContainsRune(value, 0) {
			p.id = value
		}
	case "retry":
		if value != "" && strings.Trim(value, "0123456789") == "" {
			if ms, err := strconv.ParseInt(value, 10, 64); err == nil {
				p.retry, p.retrySet = time.Duration(ms)*time.Millisecond, true
			}
		}
	}
	return true
}
