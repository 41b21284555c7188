package textcut

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCut(t *testing.T) {
	x := strings.Repeat
	for _, tt := range []struct {
		name             string
		s                string
		n                int
		prefix, cut, fit string
	}{
		{"empty", "", 0, "", "", ""},
		{"fits", "abc", 3, "abc", "abc", "abc"},
		{"ascii", "abcdef", 4, "abcd", "abcd…", "a…"},
		{"n zero", "abc", 0, "", "…", ""},
		{"n negative", "abc", -5, "", "…", ""},
		{"n below the marker", "abcdef", 2, "ab", "ab…", "ab"},
		{"n is the marker", "abcdef", 3, "abc", "abc…", "…"},
		{"on a boundary", "ab" + "é" + "cd", 4, "abé", "abé…", "a…"},
		{"inside 2 bytes", "abc" + "é" + "d", 4, "abc", "abc…", "a…"},
		{"inside 3 bytes at 1", "ab" + "日" + "d", 3, "ab", "ab…", "…"},
		{"inside 3 bytes at 2", "ab" + "日" + "d", 4, "ab", "ab…", "a…"},
		{"inside 4 bytes at 3", "a" + "🙂" + "b", 4, "a", "a…", "a…"},
		{"fit steps back", "ab" + "日本", 6, "ab日", "ab日…", "ab…"},
		{"whole rune before the cut", "🙂🙂", 4, "🙂", "🙂…", "…"},
		{"only a rune too long", "🙂", 3, "", "…", "…"},
		// Invalid UTF-8: at most three bytes are given up at the cut.
		{"stray continuation bytes", "a" + x("\x80", 10), 8, "a\x80\x80\x80\x80", "a\x80\x80\x80\x80…", "a\x80…"},
		{"leading stray continuation", x("\x80", 10), 2, "", "…", ""},
		{"truncated sequence", "ab\xe6\x97x", 3, "ab", "ab…", "…"},
	} {
		if got := Prefix(tt.s, tt.n); got != tt.prefix {
			t.Errorf("%s: Prefix(%q, %d) = %q, want %q", tt.name, tt.s, tt.n, got, tt.prefix)
		}
		if got := Cut(tt.s, tt.n); got != tt.cut {
			t.Errorf("%s: Cut(%q, %d) = %q, want %q", tt.name, tt.s, tt.n, got, tt.cut)
		}
		if got := Fit(tt.s, tt.n); got != tt.fit {
			t.Errorf("%s: Fit(%q, %d) = %q, want %q", tt.name, tt.s, tt.n, got, tt.fit)
		}
	}
}

// FuzzCut: each function returns s when it fits, otherwise a prefix of s
// (plus Marker for Cut and Fit) that stops at most utf8.UTFMax-1 bytes
// short of its budget, is valid UTF-8 when s is, and is the longest such
// prefix; Prefix and Fit are never longer than n bytes.
func FuzzCut(f *testing.F) {
	f.Add("abcdef", 4)
	f.Add(strings.Repeat("x", 79)+"é"+"y", 80)
	f.Add("a🙂b", 4)
	f.Add("日本語", 2)
	f.Add("a\x80\x80\x80\x80\x80", 5)
	f.Add("abc", -1)
	f.Fuzz(func(t *testing.T, s string, n int) {
		n %= 1 << 16 // keep n near len(s) often enough to cut
		if len(s) <= n {
			for _, got := range []string{Prefix(s, n), Cut(s, n), Fit(s, n)} {
				if got != s {
					t.Fatalf("s = %q, n = %d: got %q, want s unchanged", s, n, got)
				}
			}
			return
		}
		checkPrefix(t, "Prefix", s, n, Prefix(s, n))

		c := Cut(s, n)
		p, ok := strings.CutSuffix(c, Marker)
		if !ok {
			t.Fatalf("Cut(%q, %d) = %q: no marker", s, n, c)
		}
		checkPrefix(t, "Cut", s, n, p)

		fit := Fit(s, n)
		if len(fit) > max(n, 0) {
			t.Fatalf("Fit(%q, %d) = %q: %d bytes, over the budget", s, n, fit, len(fit))
		}
		if n < len(Marker) {
			checkPrefix(t, "Fit", s, n, fit)
			return
		}
		p, ok = strings.CutSuffix(fit, Marker)
		if !ok {
			t.Fatalf("Fit(%q, %d) = %q: no marker", s, n, fit)
		}
		checkPrefix(t, "Fit", s, n-len(Marker), p)
	})
}

// checkPrefix checks that p, what fn kept of s for a budget of n < len(s)
// bytes, is a prefix of s of at most n bytes, at most utf8.UTFMax-1 short
// of n, and for valid s valid and the longest that ends on a character
// boundary.
func checkPrefix(t *testing.T, fn, s string, n int, p string) {
	t.Helper()
	if !strings.HasPrefix(s, p) {
		t.Fatalf("%s(%q, %d) kept %q: not a prefix", fn, s, n, p)
	}
	if len(p) > max(n, 0) || len(p) < n-(utf8.UTFMax-1) {
		t.Fatalf("%s(%q, %d) kept %d bytes, want %d to %d", fn, s, n, len(p), n-(utf8.UTFMax-1), n)
	}
	if !utf8.ValidString(s) {
		return
	}
	if !utf8.ValidString(p) {
		t.Fatalf("%s(%q, %d) kept %q: cut inside a UTF-8 sequence", fn, s, n, p)
	}
	for k := len(p) + 1; k <= n; k++ {
		if utf8.RuneStart(s[k]) {
			t.Fatalf("%s(%q, %d) kept %q: %q ends on a character boundary too", fn, s, n, p, s[:k])
		}
	}
}
