package main

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzParseMeta: --meta values never panic; a parsed map holds exactly
// the key=value pairs given (the last one of a repeated key wins).
func FuzzParseMeta(f *testing.F) {
	for _, s := range []string{"zone=eu-1", "a=b=c", "=x", "novalue", "k=", "a=1\x00b=2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		kvs := strings.Split(s, "\x00")
		md, err := parseMeta(kvs)
		if err != nil {
			if !strings.Contains(err.Error(), "--meta") {
				t.Fatalf("error does not name --meta: %v", err)
			}
			return
		}
		want := map[string]string{}
		for _, kv := range kvs {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" {
				t.Fatalf("%q accepted", kv)
			}
			want[k] = v
		}
		if len(md) != len(want) {
			t.Fatalf("parseMeta(%q) = %v, want %v", kvs, md, want)
		}
		for k, v := range want {
			if md[k] != v {
				t.Fatalf("parseMeta(%q)[%q] = %q, want %q", kvs, k, md[k], v)
			}
		}
	})
}

// FuzzCells: table cells never panic, a cut cell stays within its width,
// and nothing is cut in wide.
func FuzzCells(f *testing.F) {
	f.Add("storage,trace_ingestion", 10)
	f.Add(strings.Repeat("x", 70)+",b", 0)
	f.Fuzz(func(t *testing.T, s string, width int) {
		if !utf8.ValidString(s) {
			return
		}
		caps := strings.Split(s, ",")
		if got := capsCell(caps, true); len(s) > 0 && got != s && !(s == "" && got == "-") {
			t.Fatalf("wide capsCell(%q) = %q", caps, got)
		}
		if got := capsCell(caps, false); utf8.RuneCountInString(got) > maxCapsWidth+len(",+ more")+20 && got != s {
			t.Fatalf("capsCell(%q) = %q: %d characters", caps, got, len(got))
		}
		width = width%80 + 1
		if width < 1 {
			width += 80
		}
		if got := fit(s, width, false); utf8.RuneCountInString(got) != width {
			t.Fatalf("fit(%q, %d) = %q", s, width, got)
		}
		if got := fit(s, width, true); !strings.HasPrefix(got, s) {
			t.Fatalf("fit whole (%q, %d) = %q", s, width, got)
		}
	})
}
