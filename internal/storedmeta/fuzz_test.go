package storedmeta_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/switchboard-io/switchboard/internal/storedmeta"
)

// FuzzRead: whatever a row holds, Read reads it without panicking into a
// map (never nil). A JSON object whose values are all strings, and JSON
// null, are read exactly and without a note; every other document comes
// with one: a JSON object with a value that is not a string (read as its
// JSON text, or left out when null), and anything that is not JSON or not
// an object (read as no metadata).
func FuzzRead(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":"1"}`, `{"a":1,"b":true,"c":{"x":[1]}}`, `{"a":null}`, `null`, `[]`, `"x"`, ``,
		`{"a":"\u00e9","b":"null"}`, `{"a":"1","a":"2"}`, `{"a":1,"a":"2"}`, `{"a":"\ud800"}`, `{"a": "x" }`, `{`, `{"a":"1"} x`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		md, note := storedmeta.Read(s)
		if md == nil {
			t.Fatalf("Read(%q) = nil map", s)
		}
		var doc any
		if err := json.Unmarshal([]byte(s), &doc); err != nil {
			if len(md) != 0 || note == "" {
				t.Fatalf("Read(%q) = %v, %q: want no metadata and a note for what is not JSON", s, md, note)
			}
			return
		}
		obj, isObj := doc.(map[string]any)
		switch {
		case doc == nil:
			if len(md) != 0 || note != "" {
				t.Fatalf("Read(%q) = %v, %q: want no metadata and no note for null", s, md, note)
			}
			return
		case !isObj:
			if len(md) != 0 || note == "" {
				t.Fatalf("Read(%q) = %v, %q: want no metadata and a note for what is not an object", s, md, note)
			}
			return
		}
		want := make(map[string]string, len(obj))
		strs := true
		for k, v := range obj {
			if str, ok := v.(string); ok {
				want[k] = str
			} else {
				strs = false
			}
		}
		if strs {
			if note != "" || !reflect.DeepEqual(md, want) {
				t.Fatalf("Read(%q) = %v, %q; want %v and no note", s, md, note, want)
			}
			return
		}
		if note == "" {
			t.Fatalf("Read(%q) = %v with no note: a value is not a string", s, md)
		}
		for k, v := range want {
			if md[k] != v {
				t.Fatalf("Read(%q)[%q] = %q, want the string %q", s, k, md[k], v)
			}
		}
	})
}
