package storage

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
)

// Messages are stored pre-encoded: at delivery, the summary and the message
// are encoded once as the JSON objects the API shows (MessageSummary and
// Message, without received_at, which is the stream entry's time), so a read
// copies them into the response instead of decoding Redis fields and encoding
// JSON on every request. The encoding is encoding/json's, with HTML left
// unescaped, as the edge wrote it before.

// Encoded is a message summary or a message as stored.
type Encoded struct {
	StreamID   string
	ReceivedAt time.Time
	// JSON is the API object without received_at:
	// {"id":…,"to":…,"from":…,"subject":…,"status":…}, and for a message
	// text_body and html_body after them. A message stored before layout
	// 2026-11-27 has no "to": the readers add its inbox's address (withTo).
	JSON string
}

// encodedSummary is the shape of a summary's JSON; encodedMessage a message's.
// The id must stay the first member: drop_message (lib.lua) reads it from
// the start of the stored JSON. to is the second, where withTo looks for it;
// it is left out by a store writing a layout before 2026-11-27.
type encodedSummary struct {
	ID      string `json:"id"`
	To      string `json:"to,omitempty"`
	From    string `json:"from"`
	Subject string `json:"subject"`
	Status  Status `json:"status"`
}

type encodedMessage struct {
	encodedSummary
	Text string `json:"text_body"`
	HTML string `json:"html_body"`
}

var encoders = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// encodeJSON encodes v without HTML escaping and without the newline
// json.Encoder adds.
func encodeJSON(v any) string {
	buf := encoders.Get().(*bytes.Buffer)
	defer encoders.Put(buf)
	buf.Reset()
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(fmt.Sprintf("storage: encoding a message view: %v", err)) // strings only: cannot fail
	}
	return string(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
}

// encodeSummary is the stored summary JSON of a message.
func encodeSummary(s Summary) string {
	return encodeJSON(encodedSummary{ID: s.ID.String(), To: s.To, From: s.From, Subject: s.Subject, Status: s.Status})
}

// encodeMessage is the stored message JSON; bodies are shown only when the
// message is ready.
func encodeMessage(m Message) string {
	v := encodedMessage{encodedSummary: encodedSummary{ID: m.ID.String(), To: m.To, From: m.From, Subject: m.Subject, Status: m.Status}}
	if m.Status == StatusReady {
		v.Text, v.HTML = m.Text, m.HTML
	}
	return encodeJSON(v)
}

// withoutID is message JSON js of message id without its id member, as the
// box stores it (its field name holds the id already): 43 bytes less a
// message.
func withoutID(id uuid.UUID, js string) string {
	if p := `{"id":"` + id.String() + `",`; strings.HasPrefix(js, p) {
		return "{" + js[len(p):]
	}
	return js
}

// withID is withoutID undone; a message JSON stored with its id (before
// 2026-11-25) is returned as it is.
func withID(id uuid.UUID, js string) string {
	if strings.HasPrefix(js, `{"id":`) {
		return js
	}
	return `{"id":"` + id.String() + `",` + js[1:]
}

// idPrefix is the length of a stored JSON's id member with its comma:
// {"id":"<36>",
const idPrefix = len(`{"id":"`) + 36 + len(`",`)

// withTo is summary or message JSON js (with its id member) with a "to"
// member naming addr when it has none, as a message stored before layout
// 2026-11-27 has not: it arrived for its inbox's address, the only one
// delivered then. It looks only where encodedSummary puts "to", second: a
// "to" inside a string value is escaped (\"to\") and never matches.
func withTo(js, addr string) string {
	if len(js) <= idPrefix || !strings.HasPrefix(js, `{"id":"`) || strings.HasPrefix(js[idPrefix:], `"to":`) || addr == "" {
		return js
	}
	to, _ := json.Marshal(addr)
	return js[:idPrefix] + `"to":` + string(to) + "," + js[idPrefix:]
}

// decodeSummary reads a stored summary (or message) JSON back into s.
func decodeSummary(js string, s *Summary) error {
	var v encodedSummary
	if err := json.Unmarshal([]byte(js), &v); err != nil {
		return fmt.Errorf("stored summary: %w", err)
	}
	id, err := uuid.Parse(v.ID)
	if err != nil {
		return fmt.Errorf("stored summary: %w", err)
	}
	s.ID, s.To, s.From, s.Subject, s.Status = id, v.To, v.From, v.Subject, v.Status
	return nil
}

// decodeMessage reads an Encoded message back.
func decodeMessage(e Encoded) (Message, error) {
	var v encodedMessage
	if err := json.Unmarshal([]byte(e.JSON), &v); err != nil {
		return Message{}, fmt.Errorf("stored message: %w", err)
	}
	id, err := uuid.Parse(v.ID)
	if err != nil {
		return Message{}, fmt.Errorf("stored message: %w", err)
	}
	return Message{
		Summary: Summary{ID: id, To: v.To, From: v.From, Subject: v.Subject, Status: v.Status, StreamID: e.StreamID, ReceivedAt: e.ReceivedAt},
		Text:    v.Text, HTML: v.HTML,
	}, nil
}
