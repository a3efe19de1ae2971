// Package ingest accepts mail over SMTP for live Mayfly addresses, parses it
// (enmime), sanitizes its HTML (bluemonday) and stores it through storage.
//
// Parsing never rejects a message for its content: whatever arrives for a
// live address is listed, with status failed when it cannot be parsed or
// exceeds the MIME limits (part count, nesting depth, header size), which are
// checked by a linear pre-scan before enmime sees the message.
//
// ingest never serves HTTP and stores no attachments.
package ingest
