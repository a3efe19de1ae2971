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
	// {"id":…,"from":…,"subject":…,"status":…}, and for a message
	// text_body and html_body after them.
	JSON string
}

// encodedSummary is the shape of a summary's JSON; encodedMessage a message's.
// The id must stay the first member: drop_message (lib.lua) reads it from
// the start of the stored JSON.
type encodedSummary struct {
	ID      string `json:"id"`
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
	return encodeJSON(encodedSummary{ID: s.ID.String(), From: s.From, Subject: s.Subject, Status: s.Status})
}

// encodeMessage is the stored message JSON; bodies are shown only when the
// message is ready.
func encodeMessage(m Message) string {
	v := encodedMessage{encodedSummary: encodedSummary{ID: m.ID.String(), From: m.From, Subject: m.Subject, Status: m.Status}}
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
	s.ID, s.From, s.Subject, s.Status = id, v.From, v.Subject, v.Status
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
		Summary: Summary{ID: id, From: v.From, Subject: v.Subject, Status: v.Status, StreamID: e.StreamID, ReceivedAt: e.ReceivedAt},
		Text:    v.Text, HTML: v.HTML,
	}, nil
}
