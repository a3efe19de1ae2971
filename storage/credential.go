package storage

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"strings"
)

// TagLen is the length of a mailbox tag: the local part of its address.
// 20 characters of [a-z0-9] hold about 103 random bits.
const TagLen = 20

const (
	tagAlphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	secretLen   = 32 // 256-bit credentials
)

// NewTag returns a fresh random mailbox tag. Callers that need the tag before
// the mailbox exists (the creation limiter reserves a slot for it) call this
// and hand the tag to Store.Create.
func NewTag() string {
	// Rejection sampling keeps every character uniform over the alphabet.
	const maxByte = 256 - 256%len(tagAlphabet)
	b := make([]byte, 0, TagLen)
	var buf [32]byte
	for len(b) < TagLen {
		_, _ = rand.Read(buf[:]) // crypto/rand.Read never fails (Go 1.24+)
		for _, c := range buf {
			if int(c) < maxByte && len(b) < TagLen {
				b = append(b, tagAlphabet[int(c)%len(tagAlphabet)])
			}
		}
	}
	return string(b)
}

// ValidTag reports whether s has the shape of a mailbox tag.
func ValidTag(s string) bool {
	if len(s) != TagLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// Credential is a bearer secret bound to one mailbox: the mailbox-scoped
// credential issued on creation or a session issued on select. Its string
// form "<tag>.<base64url secret>" is what the cookie carries; Redis only ever
// sees the SHA-256 of the secret.
type Credential struct {
	Tag    string
	secret [secretLen]byte
}

func newCredential(tag string) Credential {
	c := Credential{Tag: tag}
	_, _ = rand.Read(c.secret[:])
	return c
}

// String returns the cookie value. It is a secret: never log it.
func (c Credential) String() string {
	return c.Tag + "." + base64.RawURLEncoding.EncodeToString(c.secret[:])
}

// ParseCredential parses a cookie value made by String.
func ParseCredential(s string) (Credential, bool) {
	tag, enc, ok := strings.Cut(s, ".")
	if !ok || !ValidTag(tag) || len(enc) != base64.RawURLEncoding.EncodedLen(secretLen) {
		return Credential{}, false
	}
	c := Credential{Tag: tag}
	n, err := base64.RawURLEncoding.Decode(c.secret[:], []byte(enc))
	if err != nil || n != secretLen {
		return Credential{}, false
	}
	return c, true
}

// digestLen is how much of the SHA-256 of a secret Redis keeps: 128 bits,
// raw. A session is found by a hash-field probe on it, the scoped
// credential compared with it; forging either takes a second preimage of
// 128 bits of SHA-256 (2^128 work) of a value nobody outside Redis sees.
const digestLen = 16

// digestForms returns the one-way hash stored in Redis (the first
// digestLen bytes of the SHA-256 of the secret, raw) and the digest stored
// before 2026-11-25 (layout 2026-11-24, Store.writtenDigest): the
// whole SHA-256 as 64 hex digits. Readers still look that one up (a rolling
// upgrade finds sessions and mailboxes stored that way).
func (c Credential) digestForms() (cur, old string) {
	sum := sha256.Sum256(c.secret[:])
	return string(sum[:digestLen]), hex.EncodeToString(sum[:])
}

// digests is the scripts' argument for a credential: both digestForms, in
// one string (lib.lua's digests splits it), so every script looks up both
// layouts in the same call.
func (c Credential) digests() string {
	cur, old := c.digestForms()
	return cur + old
}
