package ingest

import (
	"slices"
	"testing"
	"time"
)

// A client's key (an IPv4 address or an IPv6 /64) is logged whole, as its
// network, or not at all.
func TestClientIPAttr(t *testing.T) {
	for _, tc := range []struct {
		mode      LogClientIP
		key, want string
	}{
		{LogClientIPFull, "198.51.100.7", "198.51.100.7"},
		{LogClientIPFull, "2001:db8:1:2::/64", "2001:db8:1:2::/64"},
		{LogClientIPTruncated, "198.51.100.7", "198.51.100.0/24"},
		{LogClientIPTruncated, "2001:db8:1:2::/64", "2001:db8:1::/48"},
		{LogClientIPTruncated, "not an address", "unknown"},
		{LogClientIPOff, "198.51.100.7", ""},
	} {
		got := "" // off: no attribute
		if a := clientIPAttr(tc.mode, tc.key); a.Key != "" {
			got = a.Value.String()
		}
		if got != tc.want {
			t.Errorf("clientIPAttr(%s, %q) = %q, want %q", tc.mode, tc.key, got, tc.want)
		}
	}
}

// The cap lets perSecond lines through in a second, and as many in the next.
func TestLogCap(t *testing.T) {
	c := logCap{perSecond: 2}
	now := time.Unix(1_700_000_000, 0)
	var got []bool
	for _, at := range []time.Time{now, now, now.Add(500 * time.Millisecond), now.Add(time.Second), now.Add(time.Second)} {
		got = append(got, c.allow(at))
	}
	if want := []bool{true, true, false, true, true}; !slices.Equal(got, want) {
		t.Errorf("allow = %v, want %v", got, want)
	}
}
