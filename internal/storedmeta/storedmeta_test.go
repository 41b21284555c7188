package storedmeta_test

import (
	"maps"
	"strings"
	"testing"

	"github.com/switchboard-io/switchboard/internal/storedmeta"
)

// TestRead: a stored metadata document that is not an object of
// strings (written by another tool) is read, not refused, and the note
// says what was read differently.
func TestRead(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want map[string]string
		note []string // substrings of the note; nil: no note
	}{
		{`{"zone":"a"}`, map[string]string{"zone": "a"}, nil},
		{`{}`, map[string]string{}, nil},
		{`null`, map[string]string{}, nil},
		{`{"zone": "a", "k": 1}`, map[string]string{"zone": "a", "k": "1"}, []string{`key "k"`, "JSON text"}},
		{`{"k": null, "zone": "a"}`, map[string]string{"zone": "a"}, []string{`key "k"`, "left out"}},
		{`{"b": true, "o": {"x": [1, 2]}, "f": 1.50, "n": null}`,
			map[string]string{"b": "true", "o": `{"x":[1,2]}`, "f": "1.50"},
			[]string{`keys "b", "f", "o"`, `key "n"`}},
		{`{"a":1,"b":2,"c":3,"d":4}`, map[string]string{"a": "1", "b": "2", "c": "3", "d": "4"}, []string{"and 1 more"}},
		{`[1, 2]`, map[string]string{}, []string{"not a JSON object", "no metadata"}},
		{`"x"`, map[string]string{}, []string{"not a JSON object"}},
		{`not json`, map[string]string{}, []string{"not a JSON object"}},
	} {
		got, note := storedmeta.Read(tc.in)
		if !maps.Equal(got, tc.want) || got == nil {
			t.Errorf("Read(%s) = %#v, want %#v", tc.in, got, tc.want)
		}
		if tc.note == nil && note != "" {
			t.Errorf("Read(%s): note %q, want none", tc.in, note)
		}
		if tc.note != nil && note == "" {
			t.Errorf("Read(%s): no note", tc.in)
		}
		for _, s := range tc.note {
			if !strings.Contains(note, s) {
				t.Errorf("Read(%s): note %q does not say %q", tc.in, note, s)
			}
		}
	}
}

// TestReadNullText: the text "null" inside a string is a string.
func TestReadNullText(t *testing.T) {
	got, note := storedmeta.Read(`{"k":"null","nullable":"x"}`)
	if !maps.Equal(got, map[string]string{"k": "null", "nullable": "x"}) || note != "" {
		t.Fatalf("got %#v, note %q", got, note)
	}
}
