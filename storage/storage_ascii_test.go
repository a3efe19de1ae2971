package storage_test

import (
	"testing"

	"github.com/mayfly/mayfly/storage"
)

func TestLowerASCII(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"", ""},
		{"abc@mayfly.test", "abc@mayfly.test"},
		{"ABC@Mayfly.TEST", "abc@mayfly.test"},
		{"\u212Aelvin@x", "\u212Aelvin@x"}, // KELVIN SIGN stays: strings.ToLower makes it "k"
		{"\u0130stanbul", "\u0130stanbul"}, // İ stays: strings.ToLower makes it "i"
		{"Zé\u00C9", "zé\u00C9"},           // É (U+00C9) is not ASCII either
	}
	for _, tc := range tests {
		if got := storage.LowerASCII(tc.in); got != tc.want {
			t.Errorf("LowerASCII(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	if got, want := storage.TagOf("\u212AABC@x"), "\u212Aabc"; got != want {
		t.Errorf("TagOf = %q, want %q", got, want)
	}
}
