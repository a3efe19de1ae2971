package storage

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// EventType names what happened to a mailbox.
type EventType string

// The events the scripts publish on a mailbox's channel.
const (
	EventMessage  EventType = "message"  // a message was delivered
	EventExtended EventType = "extended" // the expiry moved later
	EventDeleted  EventType = "deleted"  // the mailbox was destroyed
)

// Event is one pub/sub notification of a mailbox. Pub/sub is a wake-up, not
// the record: the stream is, and a subscriber that may have missed events
// re-reads it.
type Event struct {
	Type      EventType
	Message   Summary   // EventMessage
	ExpiresAt time.Time // EventExtended
}

// Channel is the sharded pub/sub channel of the mailbox with tag; it hashes
// to the mailbox's slot, so SSUBSCRIBE reaches the node that publishes.
func (s *Store) Channel(tag string) string { return s.keys.events(tag) }

// ParseEvent decodes a payload published by the storage scripts.
func ParseEvent(payload []byte) (Event, error) {
	var raw struct {
		Type    EventType `json:"type"`
		SID     string    `json:"sid"`
		ID      string    `json:"id"`
		From    string    `json:"from"`
		Subject string    `json:"subject"`
		Status  Status    `json:"status"`
		Expires int64     `json:"expires"`
	}
	if err := json.Unmarshal(payload, &raw); err != nil {
		return Event{}, fmt.Errorf("storage: event: %w", err)
	}
	switch raw.Type {
	case EventMessage:
		id, err := uuid.Parse(raw.ID)
		if err != nil {
			return Event{}, fmt.Errorf("storage: event: %w", err)
		}
		return Event{Type: raw.Type, Message: Summary{
			ID: id, From: raw.From, Subject: raw.Subject, Status: raw.Status,
			StreamID: raw.SID, ReceivedAt: streamTime(raw.SID),
		}}, nil
	case EventExtended:
		return Event{Type: raw.Type, ExpiresAt: msTime(raw.Expires)}, nil
	case EventDeleted:
		return Event{Type: raw.Type}, nil
	}
	return Event{}, fmt.Errorf("storage: event: unknown type %q", raw.Type)
}
