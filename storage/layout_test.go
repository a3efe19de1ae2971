package storage_test

import (
	"strings"
	"testing"
	"time"

	"github.com/mayfly/mayfly/storage"
)

// A message's delivery key is stored twice (the d:<key> field and the
// <id>:k value), so only its first 32 hex digits (128 bits) are: 64 bytes
// a message (make bench-scale's memory model).
func TestDeliveryKeyStoredShort(t *testing.T) {
	f := newFixture(t, storage.Config{})
	m, _, _ := f.open(t, 10*time.Minute)
	msg := keyedMessage("short key")
	s, err := f.store.Deliver(ctxT(t), m.Address, msg)
	if err != nil {
		t.Fatal(err)
	}
	bodies := f.prefix + ":{" + m.Tag() + "}:bodies"
	fields, err := f.client.Do(ctxT(t), f.client.B().Hgetall().Key(bodies).Build()).AsStrMap()
	if err != nil {
		t.Fatal(err)
	}
	short := msg.Key[:32]
	if fields["d:"+short] != s.ID.String() {
		t.Errorf("fields %q: want d:%s = %s", keysOf(fields), short, s.ID)
	}
	if k := fields[s.ID.String()+":k"]; !strings.HasSuffix(k, " "+short) {
		t.Errorf("%s:k = %q, want the size and %s", s.ID, k, short)
	}
	for f := range fields {
		if strings.Contains(f, msg.Key) {
			t.Errorf("field %q holds the whole delivery key", f)
		}
	}
}

func keysOf(m map[string]string) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}
