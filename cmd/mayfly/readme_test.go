package main

import (
	"os"
	"strings"
	"testing"
)

// TestREADMEListsEverySetting keeps the README's settings table and the one
// settings table of the code in step: every variable with its default.
func TestREADMEListsEverySetting(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{}
	for _, line := range strings.Split(string(readme), "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 4 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`MAYFLY_") {
			continue
		}
		rows[strings.Trim(strings.TrimSpace(cells[1]), "`")] = strings.TrimSpace(cells[2])
	}
	for _, s := range settings {
		def, ok := rows[s.env]
		if !ok {
			t.Errorf("README settings table lacks %s", s.env)
			continue
		}
		want := "`" + s.def + "`"
		if s.def == "" {
			want = "(empty)"
		}
		if def != want {
			t.Errorf("README default of %s = %s, want %s", s.env, def, want)
		}
		delete(rows, s.env)
	}
	for env := range rows {
		t.Errorf("README lists %s, which the code does not read", env)
	}
}
