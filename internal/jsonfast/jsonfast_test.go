package jsonfast

import (
	"encoding/json"
	"reflect"
	"testing"
)

var cases = []string{
	`[]`, `["a"]`, `["storage","cap-7"]`, ` [ "a" , "b" ] `, `["\u003c&\u003e"]`, `["a\"b"]`, `["é"]`,
	`null`, `[1]`, `["a",]`, `["a"`, `[`, `["a"]x`, `"a"`, `{}`, ``, `["a" "b"]`, `["tab	x"]`,
	`{}`, `{"zone":"z1","rack":"r7"}`, `{"zone": "a"}`, ` { "k" : "v" } `, `{"k":"v","k":"w"}`,
	`{"k":1}`, `{"k":"v",}`, `{"k"}`, `{"k":"v"`, `{"a\\b":"c"}`, `{"k":null}`, `{"k":"v"}}`, `[]]`,
	`{"":""}`, `[""]`, `{"k":"v"} x`,
}

func TestMatchesEncodingJSON(t *testing.T) {
	for _, c := range cases {
		var want []string
		werr := json.Unmarshal([]byte(c), &want)
		if werr == nil && want == nil {
			want = []string{}
		}
		got, err := Strings(c)
		if (err != nil) != (werr != nil) || (err == nil && !reflect.DeepEqual(got, want)) {
			t.Errorf("Strings(%q) = %q, %v; encoding/json: %q, %v", c, got, err, want, werr)
		}
		var wantM map[string]string
		werr = json.Unmarshal([]byte(c), &wantM)
		if werr == nil && wantM == nil {
			wantM = map[string]string{}
		}
		gotM, err := StringMap(c)
		if (err != nil) != (werr != nil) || (err == nil && !reflect.DeepEqual(gotM, wantM)) {
			t.Errorf("StringMap(%q) = %q, %v; encoding/json: %q, %v", c, gotM, err, wantM, werr)
		}
	}
}

func FuzzMatchesEncodingJSON(f *testing.F) {
	for _, c := range cases {
		f.Add(c)
	}
	f.Add(`"plain"`)
	f.Add(`"esc\"aped\u00e9"`)
	f.Add("\"h\xe9llo\"")
	f.Fuzz(func(t *testing.T, c string) {
		var want []string
		werr := json.Unmarshal([]byte(c), &want)
		if werr == nil && want == nil {
			want = []string{}
		}
		if got, err := Strings(c); (err != nil) != (werr != nil) || (err == nil && !reflect.DeepEqual(got, want)) {
			t.Errorf("Strings(%q) = %q, %v; encoding/json: %q, %v", c, got, err, want, werr)
		}
		var wantM map[string]string
		werr = json.Unmarshal([]byte(c), &wantM)
		if werr == nil && wantM == nil {
			wantM = map[string]string{}
		}
		if got, err := StringMap(c); (err != nil) != (werr != nil) || (err == nil && !reflect.DeepEqual(got, wantM)) {
			t.Errorf("StringMap(%q) = %q, %v; encoding/json: %q, %v", c, got, err, wantM, werr)
		}
		// String reads the string at the start of c exactly as
		// encoding/json reads that string alone.
		got, j, err := String(c, 0)
		if err == nil {
			var w string
			if werr := json.Unmarshal([]byte(c[:j]), &w); werr != nil || w != got {
				t.Errorf("String(%q) = %q up to %d; encoding/json: %q, %v", c, got, j, w, werr)
			}
		}
		var ws string
		if len(c) > 0 && c[0] == '"' && c[len(c)-1] == '"' && json.Unmarshal([]byte(c), &ws) == nil && (err != nil || j != len(c) || got != ws) {
			t.Errorf("String(%q) = %q, %d, %v; encoding/json: %q", c, got, j, err, ws)
		}
	})
}

func BenchmarkStringMap(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := StringMap(`{"rack":"r7","zone":"z1"}`); err != nil {
			b.Fatal(err)
		}
	}
}
